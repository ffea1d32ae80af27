package serve

import (
	"embed"
	"net/http"
	"strconv"
)

// The reviewer's page: where a human follows what agents do (sessions,
// checkpoints and lineage, runs, a thread live) and pauses, resumes or
// pins. It is three static files embedded in the binary (page/), plain
// HTML, CSS and JavaScript with no build step and nothing fetched from
// elsewhere, that call the JSON API like any client, logged in by a
// cookie (login.go). Records are untrusted input: the page renders them
// as text (textContent), and its Content-Security-Policy runs no script
// but its own file and lets no other site frame it.

//go:embed page
var pageFiles embed.FS

// pageCSP is the Content-Security-Policy of the page's files.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; " +
	"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// pageFile is one file of the page.
type pageFile struct {
	name, contentType string
}

// pageAssets are the page's files by path.
var pageAssets = map[string]pageFile{
	"/":         {"page/index.html", "text/html; charset=utf-8"},
	"/page.js":  {"page/page.js", "text/javascript; charset=utf-8"},
	"/page.css": {"page/page.css", "text/css; charset=utf-8"},
}

// isPagePath reports whether p is a file of the page.
func isPagePath(p string) bool {
	_, ok := pageAssets[p]
	return ok
}

// pageRoutes adds the page and the routes of logins.
func (s *Server) pageRoutes(mux *http.ServeMux) {
	for path, f := range pageAssets {
		data, err := pageFiles.ReadFile(f.name)
		if err != nil { // only a broken build lacks them
			s.logger.Error("page file missing", "file", f.name, "err", err)
			continue
		}
		pattern := "GET " + path
		if path == "/" {
			pattern = "GET /{$}" // the root alone, not every path
		}
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			h := w.Header()
			h.Set("Content-Type", f.contentType)
			h.Set("Content-Length", strconv.Itoa(len(data)))
			h.Set("Content-Security-Policy", pageCSP)
			h.Set("Referrer-Policy", "no-referrer")
			h.Set("Cross-Origin-Opener-Policy", "same-origin")
			h.Set("Cross-Origin-Resource-Policy", "same-origin")
			h.Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(data)
		})
	}
	s.loginRoutes(mux)
}
