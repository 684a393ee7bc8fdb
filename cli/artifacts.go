package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

func artifactsCommand() *ucli.Command {
	attempt := &ucli.IntFlag{Name: "attempt", Usage: "attempt number (default: the last finished one)"}
	return commandGroup("artifacts", "list and download the files a job left in /foreman/artifacts",
		ClientCommand("ls", "list a job's artifacts (from any node)", "JOB_ID", artifactsList, attempt, JSONFlag),
		ClientCommand("get", "download one artifact, or all of them, into a directory (through any node)", "JOB_ID [PATH]", artifactsGet, attempt,
			&ucli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: ".", Usage: "directory to write into (keeps the artifact's relative path); '-' writes one artifact to stdout"},
			JSONFlag),
	)
}

func artifactsList(c *ucli.Context) error {
	id, err := oneArg(c, "JOB_ID")
	if err != nil {
		return err
	}
	return call(c, func(cl *api.Client) (*api.ArtifactList, error) {
		return cl.ListArtifacts(c.Context, id, c.Int("attempt"))
	}, func(l *api.ArtifactList) error {
		return printArtifacts(c, l)
	})
}

// printArtifacts is artifacts ls's table, and on stderr where they are.
func printArtifacts(c *ucli.Context, l *api.ArtifactList) error {
	t := NewTable(Stdout(c), "PATH", "SIZE")
	for _, a := range l.Artifacts {
		t.Row(a.Path, a.Size)
	}
	if err := t.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(c.App.ErrWriter, "attempt %d on node %s (%s): %d files, %d bytes\n", l.Attempt, l.Node, orDash(l.NodeStatus), len(l.Artifacts), l.TotalBytes)
	if l.Store != "" {
		fmt.Fprintf(c.App.ErrWriter, "object store %s: %s\n", l.Store, l.Stored)
		if len(l.NotStored) > 0 {
			fmt.Fprintf(c.App.ErrWriter, "not stored: %s\n", strings.Join(l.NotStored, ", "))
		}
	}
	if l.Warning != "" {
		fmt.Fprintf(c.App.ErrWriter, "warning: %s\n", l.Warning)
	}
	return nil
}

// DownloadedArtifact is one line of `artifacts get --json`.
type DownloadedArtifact struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	File string `json:"file"`
}

func artifactsGet(c *ucli.Context) error {
	if c.NArg() < 1 || c.NArg() > 2 {
		return Exitf(2, "%s takes JOB_ID and an optional PATH (got %d arguments)", c.Command.FullName(), c.NArg())
	}
	id, one := c.Args().Get(0), c.Args().Get(1)
	if one != "" {
		if err := fsm.ValidArtifactPath(one); err != nil {
			return Exitf(2, "PATH: %v", err)
		}
	}
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	out := c.String("output")
	if out == "-" {
		if one == "" {
			return Exitf(2, "-o - writes one artifact to stdout: name its PATH")
		}
		_, err := cl.GetArtifact(c.Context, id, c.Int("attempt"), one, Stdout(c))
		return err
	}
	l, err := cl.ListArtifacts(c.Context, id, c.Int("attempt"))
	if err != nil {
		return err
	}
	var want []api.Artifact
	for _, a := range l.Artifacts {
		if one == "" || a.Path == one {
			want = append(want, a)
		}
	}
	if one != "" && len(want) == 0 {
		return Exitf(1, "job %s attempt %d has no artifact %q (see foreman artifacts ls %s)", id, l.Attempt, one, id)
	}
	var done []DownloadedArtifact
	for _, a := range want {
		if err := fsm.ValidArtifactPath(a.Path); err != nil {
			return fmt.Errorf("artifact %q: %v", a.Path, err) // never write outside the directory
		}
		dst := filepath.Join(out, filepath.FromSlash(a.Path))
		n, err := downloadArtifact(c, cl, id, l.Attempt, a.Path, dst)
		if err != nil {
			return err
		}
		done = append(done, DownloadedArtifact{Path: a.Path, Size: n, File: dst})
	}
	if c.Bool("json") {
		if done == nil {
			done = []DownloadedArtifact{}
		}
		return PrintJSON(c, done)
	}
	for _, d := range done {
		fmt.Fprintf(Stdout(c), "%s\t%d bytes\n", d.File, d.Size)
	}
	return nil
}

// downloadArtifact writes one artifact to dst through a temporary file, so
// a failed transfer leaves no partial file behind.
func downloadArtifact(c *ucli.Context, cl *api.Client, id string, attempt int, path, dst string) (int64, error) {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return 0, err
	}
	f, err := os.CreateTemp(filepath.Dir(dst), ".foreman-artifact-*")
	if err != nil {
		return 0, err
	}
	_ = f.Chmod(0o644) // CreateTemp makes it 0600
	n, err := cl.GetArtifact(c.Context, id, attempt, path, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), dst)
	}
	if err != nil {
		os.Remove(f.Name())
		return 0, err
	}
	return n, nil
}
