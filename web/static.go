package web

import (
	"embed"
	"github.com/lockhub/lockhub/protocol"
	"io"
	"net/http"
	"path"
	"strings"
)

// embedded holds the browser client (lockhub.js) and the demo page, written in
// static/ and served at / and /static/.
//
//go:embed static
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

// index: GET / serves index.html, the demo page.
func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	s.serveStatic(w, r, "index.html")
}

// staticFile: GET /static/* serves the other files.
func (s *Server) staticFile(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(path.Clean("/"+strings.TrimPrefix(r.URL.Path, "/static/")), "/")
	if name == "" || name == "." {
		s.fail(w, r, Errorf(protocol.CodeNotFound, "no file %s", r.URL.Path))
		return
	}
	s.serveStatic(w, r, name)
}

func (s *Server) serveStatic(w http.ResponseWriter, r *http.Request, name string) {
	f, err := s.static.Open(name)
	if err != nil {
		s.fail(w, r, Errorf(protocol.CodeNotFound, "no file %s", r.URL.Path))
		return
	}
	defer f.Close()
	st, err := f.Stat()
	rs, seekable := f.(io.ReadSeeker)
	if err != nil || st.IsDir() || !seekable {
		s.fail(w, r, Errorf(protocol.CodeNotFound, "no file %s", r.URL.Path))
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
