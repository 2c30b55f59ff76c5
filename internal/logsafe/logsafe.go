// Package logsafe turns URLs, connection strings and errors into text that
// may be logged. Every log of a URL (a database URL, a provider base URL, a
// webhook) and every logged error that may quote one goes through it, so
// that credentials carried in a URL never reach a log: user info, query
// values and fragments are removed, and so is a password in a key=value
// connection string. URL keeps paths (configured base URLs are read with
// them); Origin and the URLs inside errors keep only the scheme and host,
// because a webhook's path is often the secret itself.
package logsafe

import (
	"log/slog"
	"net/url"
	"regexp"
	"strings"
)

// Redacted stands in for every value removed.
const Redacted = "REDACTED"

// URL returns raw without credentials: for a URL, the user info is
// dropped and every query value and the fragment replaced by Redacted; for
// a key=value connection string (host=db password=x), the password values
// are replaced. Text it cannot parse is cut to its scheme and host, or to
// Redacted: it never returns raw unchanged unless raw holds no credential.
func URL(raw string) string {
	if raw == "" {
		return ""
	}
	if !strings.Contains(raw, "://") {
		if strings.Contains(raw, "=") {
			return dsnPassword.ReplaceAllString(raw, "${1}"+Redacted)
		}
		return raw // a host, a host:port or a path: nothing secret in it
	}
	u, err := url.Parse(raw)
	if err != nil {
		return unparseable(raw)
	}
	u.User = nil
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{Redacted}
		}
		u.RawQuery = q.Encode()
	}
	if u.Fragment != "" || u.RawFragment != "" {
		u.Fragment, u.RawFragment = Redacted, ""
	}
	return u.String()
}

// Origin returns only raw's scheme and host ("https://hooks.example.com"),
// for URLs whose path carries the secret, as webhook URLs often do.
func Origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return unparseable(raw)
	}
	return u.Scheme + "://" + u.Host
}

// dsnPassword matches the password (and sslpassword) of a libpq key=value
// connection string, quoted or not.
var dsnPassword = regexp.MustCompile(`(?i)(\b(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s]*)`)

// unparseable keeps what is certainly not a credential of a URL that does
// not parse: the scheme and the host after any user info, up to the path.
func unparseable(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return Redacted
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		rest = rest[i+1:]
	}
	return scheme + "://" + rest + "/" + Redacted
}

// urlInText finds URLs quoted inside error text: Go's *url.Error and
// url.Parse errors quote the whole URL, user info and query included.
var urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>` + "`" + `]+`)

// Error returns err's text with every URL in it cut to its scheme and host
// (see inError), and any key=value password redacted; "" for a nil err.
func Error(err error) string {
	if err == nil {
		return ""
	}
	return Text(err.Error())
}

// Text is Error for text already in hand: a message that may quote a URL
// or a connection string.
func Text(s string) string {
	s = urlInText.ReplaceAllStringFunc(s, inError)
	return dsnPassword.ReplaceAllString(s, "${1}"+Redacted)
}

// inError is how a URL quoted in an error is logged: its origin, and
// "/REDACTED" when it had more (a path, a query), which a failed call's
// diagnosis does not need and a webhook URL hides its secret in.
func inError(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return unparseable(raw)
	}
	if (u.Path == "" || u.Path == "/") && u.RawQuery == "" && u.Fragment == "" {
		return u.Scheme + "://" + u.Host + u.Path
	}
	return u.Scheme + "://" + u.Host + "/" + Redacted
}

// ErrorAttr is the "error" attribute of a log line, made safe by Error.
func ErrorAttr(err error) slog.Attr { return slog.String("error", Error(err)) }

// URLAttr is a log attribute holding raw made safe by URL.
func URLAttr(key, raw string) slog.Attr { return slog.String(key, URL(raw)) }
