// Package ui holds the web UI's static assets, embedded into the binary.
// It contains no Go logic: the pages talk to the REST API like any client.
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
