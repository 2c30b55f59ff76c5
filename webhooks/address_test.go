package webhooks

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync/atomic"
	"testing"
	"time"
)

// TestAddressPolicy: every refused and private range, in each form that
// carries an IPv4 (IPv4-mapped, SIIT, NAT64, 6to4), for a webhook set
// with and without private addresses allowed, and what an allow list
// opens: private ranges by any entry holding them, refused ones only by
// an entry inside their block.
func TestAddressPolicy(t *testing.T) {
	t.Parallel()
	const (
		pub  = "public"
		priv = "private"
		ref  = "refused"
	)
	cases := []struct {
		addr string
		want string
	}{
		// Cloud metadata and link-local.
		{"169.254.169.254", ref},
		{"169.254.0.1", ref},
		{"169.254.255.255", ref},
		{"100.100.100.200", ref},
		{"192.0.0.192", ref},
		{"168.63.129.16", ref},
		{"fd00:ec2::254", ref},
		{"fd20:ce::254", ref},
		{"fe80::1", ref},
		{"fe80::a9fe:a9fe%eth0", ref},
		// Their IPv6 forms.
		{"::ffff:169.254.169.254", ref},
		{"::ffff:0:169.254.169.254", ref},
		{"64:ff9b::169.254.169.254", ref},
		{"64:ff9b::a9fe:a9fe", ref},
		{"64:ff9b::100.100.100.200", ref},
		{"64:ff9b::192.0.0.192", ref},
		{"2002:a9fe:a9fe::", ref},
		{"2002:a9fe:a9fe:1234::1", ref},
		{"2002:6464:64c8::1", ref},
		{"2002:c000:00c0::1", ref},
		// Other addresses no webhook may reach.
		{"0.0.0.0", ref},
		{"0.1.2.3", ref},
		{"::", ref},
		{"224.0.0.1", ref},
		{"239.255.255.250", ref},
		{"255.255.255.255", ref},
		{"240.0.0.1", ref},
		{"ff02::1", ref},
		{"::169.254.169.254", ref},
		{"::8.8.8.8", ref},
		{"64:ff9b:1::a9fe:a9fe", ref},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", ref},
		{"100::1", ref},
		// Private ranges.
		{"127.0.0.1", priv},
		{"127.255.255.254", priv},
		{"::1", priv},
		{"10.0.0.1", priv},
		{"172.16.0.1", priv},
		{"172.31.255.255", priv},
		{"192.168.1.1", priv},
		{"100.64.0.1", priv},
		{"100.127.255.255", priv},
		{"192.0.0.8", priv},
		{"198.18.0.1", priv},
		{"192.0.2.1", priv},
		{"2001:db8::1", priv},
		{"fc00::1", priv},
		{"fd12:3456::1", priv},
		{"fec0::1", priv},
		{"::ffff:10.0.0.1", priv},
		{"::ffff:127.0.0.1", priv},
		{"64:ff9b::10.0.0.1", priv},
		{"64:ff9b::127.0.0.1", priv},
		{"2002:0a00:0001::1", priv},
		{"2002:7f00:0001::1", priv},
		// Public.
		{"8.8.8.8", pub},
		{"172.32.0.1", pub},
		{"100.128.0.1", pub},
		{"169.253.255.255", pub},
		{"169.255.0.0", pub},
		{"192.0.1.1", pub},
		{"2606:4700::1111", pub},
		{"::ffff:8.8.8.8", pub},
		{"64:ff9b::8.8.8.8", pub},
		{"2002:0808:0808::1", pub},
	}
	var none AddressPolicy
	for _, c := range cases {
		a := netip.MustParseAddr(c.addr)
		strict, private := none.Check(a, false), none.Check(a, true)
		got := pub
		switch {
		case strict != nil && private != nil:
			got = ref
		case strict != nil:
			got = priv
		}
		if got != c.want {
			t.Errorf("%s: %s (strict %v, private allowed %v), want %s", c.addr, got, strict, private, c.want)
		}
		var ae *AddressError
		if strict != nil && (!errors.As(strict, &ae) || ae.Private != (c.want == priv) || !errors.Is(strict, errBlockedAddress)) {
			t.Errorf("%s: error %#v, want an *AddressError, Private %v", c.addr, strict, c.want == priv)
		}
	}

	allow, err := ParseAllow("10.1.0.0/16, 169.254.169.254/32 0.0.0.0/0,fd00:ec2::254 ::/0")
	if err != nil {
		t.Fatal(err)
	}
	with := AddressPolicy{Allow: allow}
	lists := []struct {
		addr string
		ok   bool
	}{
		{"10.1.2.3", true},                  // inside 10.1.0.0/16 (and 0.0.0.0/0)
		{"192.168.1.1", true},               // 0.0.0.0/0 holds every private IPv4
		{"::ffff:10.1.2.3", true},           // matched by its IPv4
		{"64:ff9b::10.1.2.3", true},         // likewise
		{"169.254.169.254", true},           // listed inside its block
		{"::ffff:169.254.169.254", true},    // the same address, mapped
		{"64:ff9b::169.254.169.254", true},  // the same address, through NAT64
		{"fd00:ec2::254", true},             // listed exactly
		{"169.254.170.2", false},            // 0.0.0.0/0 opens no metadata address
		{"100.100.100.200", false},          // nor this one
		{"fd20:ce::254", false},             // ::/0 opens no metadata address
		{"fe80::1", false},                  // nor link-local
		{"2002:a9fe:aa02::1", false},        // 169.254.170.2 through 6to4
		{"fd12::1", true},                   // ::/0 holds every private IPv6
		{"64:ff9b::a9fe:aa02", false},       // NAT64 matched by its IPv4, not ::/0
		{"2001:0:4136:e378:8000::1", false}, // Teredo: ::/0 is broader than its block
	}
	for _, c := range lists {
		if err := with.Check(netip.MustParseAddr(c.addr), false); (err == nil) != c.ok {
			t.Errorf("with allow list, %s: %v, want allowed %v", c.addr, err, c.ok)
		}
	}
}

func TestParseAllow(t *testing.T) {
	t.Parallel()
	good := map[string][]string{
		"":                          nil,
		"10.0.0.0/8":                {"10.0.0.0/8"},
		" 10.0.0.0/8 ,fd00::/8\t":   {"10.0.0.0/8", "fd00::/8"},
		"192.168.1.5":               {"192.168.1.5/32"},
		"::1":                       {"::1/128"},
		"::ffff:10.0.0.0/104":       {"10.0.0.0/8"},
		"169.254.169.254/32,::/0,,": {"169.254.169.254/32", "::/0"},
	}
	for in, want := range good {
		got, err := ParseAllow(in)
		if err != nil || len(got) != len(want) {
			t.Errorf("ParseAllow(%q) = %v, %v; want %v", in, got, err, want)
			continue
		}
		for i := range want {
			if got[i].String() != want[i] {
				t.Errorf("ParseAllow(%q)[%d] = %s, want %s", in, i, got[i], want[i])
			}
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "10.0.0.1/8", "example.com", "10.0.0", "fe80::1%eth0", "::ffff:10.0.0.0/8", "10.0.0.0/8;"} {
		if _, err := ParseAllow(bad); err == nil {
			t.Errorf("ParseAllow(%q) accepted", bad)
		}
	}
}

// resolverMap resolves names from a map, failing for others.
type resolverMap map[string][]string

func (r resolverMap) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	addrs, ok := r[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []netip.Addr
	for _, a := range addrs {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

// TestCheckHost: at PUT a literal address and every address a name
// resolves to is checked; a name that does not resolve is accepted (the
// dial checks it).
func TestCheckHost(t *testing.T) {
	t.Parallel()
	p := AddressPolicy{Resolver: resolverMap{
		"hooks.example.com": {"93.184.216.34"},
		"mixed.example.com": {"93.184.216.34", "169.254.169.254"},
		"lan.example.com":   {"192.168.1.20"},
	}}
	cases := []struct {
		host           string
		privateAllowed bool
		ok             bool
	}{
		{"hooks.example.com", false, true},
		{"mixed.example.com", false, false},
		{"mixed.example.com", true, false},
		{"lan.example.com", false, false},
		{"lan.example.com", true, true},
		{"nowhere.example.com", false, true},
		{"169.254.169.254", true, false},
		{"10.0.0.1", false, false},
		{"10.0.0.1", true, true},
		{"::ffff:a9fe:a9fe", true, false},
	}
	for _, c := range cases {
		if err := p.CheckHost(context.Background(), c.host, c.privateAllowed); (err == nil) != c.ok {
			t.Errorf("CheckHost(%s, private %v) = %v, want ok %v", c.host, c.privateAllowed, err, c.ok)
		}
	}
}

// TestDialChecksResolvedAddresses: a name that resolves to a refused
// address, at delivery whatever it resolved to at PUT, is refused at the
// dial of that address; the receiver listening there gets nothing. A
// name with an allowed address beside a refused one reaches the allowed
// one only.
func TestDialChecksResolvedAddresses(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
	t.Cleanup(rcv.Close)
	port := mustPort(t, rcv.URL)
	res := resolverMap{
		"rebind.test":   {"127.0.0.1"},
		"metadata.test": {"169.254.169.254", "64:ff9b::a9fe:a9fe"},
		"both.test":     {"169.254.169.254", "127.0.0.1"},
	}
	s := &Service{cfg: Config{Timeout: 2 * time.Second}}
	strict := newClient(2*time.Second, AddressPolicy{Resolver: res}, false)
	private := newClient(2*time.Second, AddressPolicy{Resolver: res}, true)
	allowed := newClient(2*time.Second, AddressPolicy{Resolver: res, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, false)
	cases := []struct {
		name   string
		client *http.Client
		host   string
		want   string // the attempt's class; "" for an answer
	}{
		{"loopback, private not allowed", strict, "rebind.test", "blocked_address"},
		{"metadata, private allowed", private, "metadata.test", "blocked_address"},
		{"metadata, loopback listed", allowed, "metadata.test", "blocked_address"},
		{"unresolved", strict, "nowhere.test", "dns"},
		{"loopback, private allowed", private, "rebind.test", ""},
		{"loopback, listed", allowed, "rebind.test", ""},
		{"metadata beside loopback, private allowed", private, "both.test", ""},
	}
	for _, c := range cases {
		before := hits.Load()
		r := s.post(context.Background(), c.client, signedDelivery{url: "http://" + net.JoinHostPort(c.host, port) + "/in", id: "msg_1", at: time.Now(), sig: "v1,x", body: []byte(`{}`)})
		if r.class != c.want || (c.want == "") != (hits.Load() == before+1) {
			t.Errorf("%s: %+v, receiver hit %v; want class %q", c.name, r, hits.Load() != before, c.want)
		}
	}
}

func mustPort(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Port()
}

// TestShownIsCoarse: the deliveries list says "unreachable" for every
// failure without an answer and for any non-2xx answer of a URL that has
// never accepted a delivery; only a URL that has shows its status code.
func TestShownIsCoarse(t *testing.T) {
	t.Parallel()
	for _, class := range []string{"blocked_address", "dns", "timeout", "tls", "network"} {
		for _, accepted := range []bool{false, true} {
			if st, c := (attemptResult{class: class}).shown(accepted); st != nil || c == nil || *c != ClassUnreachable {
				t.Errorf("%s, accepted %v: %v %v, want no status and unreachable", class, accepted, st, c)
			}
		}
	}
	for _, status := range []int{301, 307, 400, 401, 404, 500, 502} {
		if st, c := (attemptResult{status: status}).shown(false); st != nil || c == nil || *c != ClassUnreachable {
			t.Errorf("status %d, never accepted: %v %v, want no status and unreachable", status, st, c)
		}
		if st, c := (attemptResult{status: status}).shown(true); st == nil || *st != status || c == nil || *c != ClassHTTPStatus {
			t.Errorf("status %d, accepted before: %v %v, want the status and http_status", status, st, c)
		}
	}
	if st, c := (attemptResult{status: 204}).shown(false); st == nil || *st != 204 || c != nil {
		t.Errorf("204: %v %v, want the status and no error", st, c)
	}
}
