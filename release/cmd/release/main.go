// Command release builds foreman's release artifacts into dist/: `make
// release VERSION=vX.Y.Z` runs it (package release says what it makes).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/foreman-sched/foreman/release"
)

func main() {
	cfg := release.DefaultConfig()
	arches := strings.Join(cfg.Arches, ",")
	flag.StringVar(&cfg.Version, "version", "", "the release's tag: vX.Y.Z (semver)")
	flag.StringVar(&cfg.Out, "out", cfg.Out, "where the artifacts go")
	flag.StringVar(&cfg.Tags, "tags", cfg.Tags, "go build tags")
	flag.StringVar(&arches, "arch", arches, "architectures, comma-separated")
	flag.Parse()
	if flag.NArg() != 0 {
		fmt.Fprintf(os.Stderr, "release: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	cfg.Arches = strings.Split(arches, ",")
	cfg.Log = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	arts, err := release.Build(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, a := range arts {
		fmt.Printf("%-40s %10d  %s\n", a.Name, a.Size, a.SHA256)
	}
}
