package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/julienschmidt/httprouter"
)

//go:embed assets
var assetFS embed.FS

// asset is one embedded file served under a name that carries a hash of its content,
// so it can be cached forever: a new build with a changed file has a new name.
type asset struct {
	name  string // hashed name: app.3f2a9c1d7e.css
	ctype string
	body  []byte
	gzip  []byte // nil when compressing does not pay
}

type assets struct {
	byHashed map[string]*asset
	byPlain  map[string]*asset
}

func loadAssets() *assets {
	a := &assets{byHashed: map[string]*asset{}, byPlain: map[string]*asset{}}
	err := fs.WalkDir(assetFS, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := assetFS.ReadFile(p)
		if err != nil {
			return err
		}
		plain := strings.TrimPrefix(p, "assets/")
		sum := sha256.Sum256(body)
		ext := path.Ext(plain)
		hashed := strings.TrimSuffix(plain, ext) + "." + hex.EncodeToString(sum[:5]) + ext
		as := &asset{name: hashed, ctype: mime.TypeByExtension(ext), body: body}
		if as.ctype == "" {
			as.ctype = "application/octet-stream"
		}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(body)
		zw.Close()
		if buf.Len() < len(body)*9/10 {
			as.gzip = buf.Bytes()
		}
		a.byHashed[hashed], a.byPlain[plain] = as, as
		return nil
	})
	if err != nil {
		// The files are compiled in; failing to read them is a broken build.
		panic("web: load embedded assets: " + err.Error())
	}
	return a
}

// url returns the content-hashed URL of an asset by its plain name.
func (a *assets) url(plain string) string {
	if as, ok := a.byPlain[plain]; ok {
		return "/assets/" + as.name
	}
	panic("web: unknown asset " + plain)
}

// serveAsset serves /assets/<hashed name>. Unhashed or stale names are 404 so that
// nothing is ever cached under a name whose content can change.
func (u *UI) serveAsset(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	securityHeaders(w.Header())
	as, ok := u.assets.byHashed[strings.TrimPrefix(p.ByName("file"), "/")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", as.ctype)
	h.Set("Cache-Control", "public, max-age=31536000, immutable")
	h.Set("Vary", "Accept-Encoding")
	body := as.body
	if as.gzip != nil && acceptsGzip(r) {
		h.Set("Content-Encoding", "gzip")
		body = as.gzip
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if r.Method == http.MethodHead {
		return
	}
	w.Write(body)
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.TrimSpace(q) != "q=0" {
			return true
		}
	}
	return false
}
