// Package web holds the approval console: plain HTML, CSS and JavaScript modules, embedded in the
// binary and served at /. It uses the same GraphQL API as every other client.
package web

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var files embed.FS

// Handler serves the console's files.
func Handler() http.Handler {
	sub, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return http.FileServerFS(sub)
}
