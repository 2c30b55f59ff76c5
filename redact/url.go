package redact

import (
	"net/url"
	"strings"
)

// QueryPlaceholder stands for a URL's query string and fragment in a
// stored URL.
const QueryPlaceholder = "[QUERY]"

// URLWithoutSecrets is a URL as it may be stored: its scheme, host and path,
// without the user information, query string or fragment, which is where a
// signed URL (S3, GCS, CDN tokens) carries its credentials; a dropped query
// or fragment is marked by QueryPlaceholder. The rules do not know every
// signing scheme, so the query goes whatever it holds. A string that does
// not parse as an absolute URL is returned as "" with ok false, for the
// caller to treat as text.
func URLWithoutSecrets(raw string) (kept string, ok bool) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Scheme == "" || u.Host == "" || u.Opaque != "" {
		return "", false
	}
	out := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	kept = out.String()
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		kept += "?" + QueryPlaceholder
	}
	return kept, true
}
