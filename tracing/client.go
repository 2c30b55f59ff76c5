package tracing

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"
)

// exportClient is the HTTP client spans are exported with. It never
// follows a redirect: Go's client re-sends a 307 or 308's body and every
// header but Authorization and cookies to the new location, and the
// headers of OTEL_EXPORTER_OTLP_HEADERS often hold a collector's API key.
// A redirect is an export error, logged like any other (LogErrors).
//
// Handing the exporter a client of our own makes it ignore the variables
// it reads into its own client, so this one reads them as the
// specification defines them: the timeout in milliseconds (default 10 s),
// the CA certificate and the client certificate and key, each with its
// _TRACES_ form first. A certificate that cannot be read is an error.
func exportClient(getenv func(string) string) (*http.Client, error) {
	timeout := 10 * time.Second
	if v := traceVar(getenv, "TIMEOUT"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 32)
		if err != nil || ms < 0 {
			return nil, fmt.Errorf("tracing: OTLP timeout %q is not a number of milliseconds", v)
		}
		timeout = time.Duration(ms) * time.Millisecond
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tlsCfg, err := tlsConfig(getenv)
	if err != nil {
		return nil, err
	}
	if tlsCfg != nil {
		tr.TLSClientConfig = tlsCfg
	}
	return &http.Client{
		Transport:     tr,
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}

// tlsConfig is the TLS configuration the OTLP certificate variables ask
// for, or nil when none is set.
func tlsConfig(getenv func(string) string) (*tls.Config, error) {
	ca, cert, key := traceVar(getenv, "CERTIFICATE"), traceVar(getenv, "CLIENT_CERTIFICATE"), traceVar(getenv, "CLIENT_KEY")
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("tracing: OTLP certificate: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("tracing: OTLP certificate: no PEM certificate in " + ca)
		}
		cfg.RootCAs = pool
	}
	if cert != "" || key != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("tracing: OTLP client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// traceVar is OTEL_EXPORTER_OTLP_TRACES_<name>, else OTEL_EXPORTER_OTLP_<name>.
func traceVar(getenv func(string) string, name string) string {
	if v := getenv("OTEL_EXPORTER_OTLP_TRACES_" + name); v != "" {
		return v
	}
	return getenv("OTEL_EXPORTER_OTLP_" + name)
}
