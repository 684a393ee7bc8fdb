// Package ui holds the web UI: its static assets, embedded into the binary,
// and the handler that serves them under /ui/. It contains no API logic: the
// pages talk to the REST API like any client (see ui/README.md).
package ui

import (
	"embed"
	"io/fs"
)

//go:embed static
var static embed.FS

// Assets returns the UI's files, rooted at the static directory.
func Assets() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embed pattern above guarantees the directory exists
	}
	return sub
}
