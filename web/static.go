package web

import (
	"embed"
	"io"
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/lockhub/lockhub/protocol"
)

// embedded holds the browser client (lockhub.js and its modules), written in static/
// and served at /static/. The patterns name the client's own files: the npm package's
// node_modules, tests and generated types next to them (static/lockhub/package.json)
// are not the page's and stay out of the binary.
//
//go:embed static/lockhub.js static/lockhub.css static/lockhub/*.js static/lockhub/README.md
var embedded embed.FS

// contentTypes pins the types the browser relies on: ES modules must be served as
// JavaScript (HTML §8.1.5.2 refuses a module script of another MIME type), and the
// system's MIME table that mime.TypeByExtension reads may say otherwise.
var contentTypes = map[string]string{
	".html":  "text/html; charset=utf-8",
	".js":    "text/javascript; charset=utf-8",
	".mjs":   "text/javascript; charset=utf-8",
	".css":   "text/css; charset=utf-8",
	".json":  "application/json",
	".map":   "application/json",
	".svg":   "image/svg+xml",
	".png":   "image/png",
	".ico":   "image/x-icon",
	".woff2": "font/woff2",
	".txt":   "text/plain; charset=utf-8",
}

// FileServer serves the files of fsys, named by the request path (strip any prefix
// first), with the content types the browser relies on and no-cache, so a new build
// is picked up at once. A directory, a missing file or an empty name answers 404
// not_found in the body shape of every error.
func FileServer(fsys fs.FS) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
		if name == "" || name == "." {
			WriteError(w, r, nil, Errorf(protocol.CodeNotFound, "no file %s", r.URL.Path))
			return
		}
		ServeFile(w, r, fsys, name)
	})
}

// ServeFile answers the file name of fsys, as FileServer does.
func ServeFile(w http.ResponseWriter, r *http.Request, fsys fs.FS, name string) {
	f, err := fsys.Open(name)
	if err != nil {
		WriteError(w, r, nil, Errorf(protocol.CodeNotFound, "no file %s", r.URL.Path))
		return
	}
	defer f.Close()
	st, err := f.Stat()
	rs, seekable := f.(io.ReadSeeker)
	if err != nil || st.IsDir() || !seekable {
		WriteError(w, r, nil, Errorf(protocol.CodeNotFound, "no file %s", r.URL.Path))
		return
	}
	if ct, ok := contentTypes[strings.ToLower(path.Ext(name))]; ok {
		w.Header().Set("Content-Type", ct)
	}
	// Embedded files have no modification time; make browsers revalidate, so a new
	// build is picked up at once.
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, name, st.ModTime(), rs)
}
