package console

import "net/http"

// routes lists the console's whole surface.
func (c *console) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /console", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
	})
	mux.HandleFunc("GET /console/{$}", c.serveIndex)
	mux.HandleFunc("GET /console/assets/{name}", c.serveAsset)
	mux.HandleFunc("GET /console/session", c.getSession)
	mux.HandleFunc("POST /console/session", c.signIn)
	mux.HandleFunc("DELETE /console/session", c.signOut)
	mux.HandleFunc("/console/api/", c.proxy)
	return mux
}

// contentSecurityPolicy allows only the console's own files: no inline
// script, no third-party origin, no framing.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; " +
	"img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}
