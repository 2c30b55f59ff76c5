package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"time"
)

// The front end: plain files, no build step. Everything the page loads
// comes from here, so it works with no network.
//
//go:embed assets
var assetFS embed.FS

// contentTypes are set explicitly rather than read from the system's MIME
// tables, which differ between hosts (and nosniff makes a wrong one fatal).
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

type asset struct {
	data        []byte
	contentType string
	etag        string
}

// loadAssets reads every embedded file once, with its content type and
// ETag. It fails on a file of a type it cannot name.
func loadAssets() (map[string]asset, error) {
	out := make(map[string]asset)
	err := fs.WalkDir(assetFS, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := assetFS.ReadFile(p)
		if err != nil {
			return err
		}
		ct, ok := contentTypes[path.Ext(p)]
		if !ok {
			return fmt.Errorf("console: no content type for asset %s", p)
		}
		sum := sha256.Sum256(data)
		out[path.Base(p)] = asset{data: data, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("console: load assets: %w", err)
	}
	if _, ok := out["index.html"]; !ok {
		return nil, fmt.Errorf("console: assets/index.html is missing")
	}
	return out, nil
}

func (c *console) serveIndex(w http.ResponseWriter, r *http.Request) {
	c.serve(w, r, "index.html")
}

func (c *console) serveAsset(w http.ResponseWriter, r *http.Request) {
	c.serve(w, r, r.PathValue("name"))
}

// serve writes one embedded file; browsers revalidate it by ETag, so a new
// binary's files are picked up at once.
func (c *console) serve(w http.ResponseWriter, r *http.Request, name string) {
	a, ok := c.assets[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", a.contentType)
	w.Header().Set("ETag", a.etag)
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.data))
}
