package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// AddressKind is what an address is to the address policy.
type AddressKind int

const (
	// AddressPublic may be reached by any webhook.
	AddressPublic AddressKind = iota
	// AddressPrivate (loopback, RFC 1918, unique local, CGNAT and other
	// non-global ranges) may be reached by a webhook an admin key set, or
	// when TOLLGATE_WEBHOOK_ALLOW lists it.
	AddressPrivate
	// AddressRefused (cloud metadata services, link-local, unspecified,
	// multicast, reserved, and the IPv6 transition forms whose IPv4 cannot
	// be read) is never reached unless TOLLGATE_WEBHOOK_ALLOW lists an
	// entry inside its block.
	AddressRefused
)

// block is one range of addresses that is not public.
type block struct {
	prefix netip.Prefix
	kind   AddressKind
	name   string
}

func b(prefix string, kind AddressKind, name string) block {
	return block{netip.MustParsePrefix(prefix), kind, name}
}

// blocks are the non-public ranges, the first that holds an address
// deciding it: a metadata address inside a private range comes before it.
// IPv4-mapped, SIIT (::ffff:0:a.b.c.d), NAT64 (64:ff9b::/96) and 6to4
// (2002::/16) addresses are decided by the IPv4 they carry (embeddedIPv4),
// before this table is read.
var blocks = []block{
	// Cloud metadata services: AWS, GCP, Azure, Alibaba, Oracle (IPv4 and
	// IPv6), and the Azure host's WireServer.
	b("169.254.0.0/16", AddressRefused, "link-local (cloud metadata)"),
	b("100.100.100.200/32", AddressRefused, "cloud metadata"),
	b("192.0.0.192/32", AddressRefused, "cloud metadata"),
	b("168.63.129.16/32", AddressRefused, "cloud metadata"),
	b("fd00:ec2::254/128", AddressRefused, "cloud metadata"),
	b("fd20:ce::254/128", AddressRefused, "cloud metadata"),
	b("0.0.0.0/8", AddressRefused, "unspecified"),
	b("224.0.0.0/4", AddressRefused, "multicast"),
	b("240.0.0.0/4", AddressRefused, "reserved"),
	b("::/128", AddressRefused, "unspecified"),
	b("::1/128", AddressPrivate, "loopback"),
	b("::/96", AddressRefused, "IPv4-compatible"),
	b("100::/64", AddressRefused, "discard-only"),
	b("64:ff9b:1::/48", AddressRefused, "local-use NAT64"),
	b("2001::/32", AddressRefused, "Teredo"),
	b("fe80::/10", AddressRefused, "link-local"),
	b("ff00::/8", AddressRefused, "multicast"),

	b("127.0.0.0/8", AddressPrivate, "loopback"),
	b("10.0.0.0/8", AddressPrivate, "private"),
	b("172.16.0.0/12", AddressPrivate, "private"),
	b("192.168.0.0/16", AddressPrivate, "private"),
	b("100.64.0.0/10", AddressPrivate, "shared (CGNAT)"),
	b("192.0.0.0/24", AddressPrivate, "IETF protocol assignments"),
	b("198.18.0.0/15", AddressPrivate, "benchmarking"),
	b("192.0.2.0/24", AddressPrivate, "documentation"),
	b("198.51.100.0/24", AddressPrivate, "documentation"),
	b("203.0.113.0/24", AddressPrivate, "documentation"),
	b("2001:db8::/32", AddressPrivate, "documentation"),
	b("fec0::/10", AddressPrivate, "site-local"),
	b("fc00::/7", AddressPrivate, "unique local"),
}

var (
	siit  = netip.MustParsePrefix("::ffff:0:0:0/96")
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
	sixTo = netip.MustParsePrefix("2002::/16")
)

// embeddedIPv4 is the IPv4 address a carries: itself unmapped when it is
// IPv4 or IPv4-mapped, the IPv4 that a SIIT, NAT64 or 6to4 address routes
// to; ok false for any other IPv6 address.
func embeddedIPv4(a netip.Addr) (v4 netip.Addr, ok bool) {
	a = a.Unmap()
	if a.Is4() {
		return a, true
	}
	s := a.As16()
	switch {
	case siit.Contains(a), nat64.Contains(a):
		return netip.AddrFrom4([4]byte(s[12:16])), true
	case sixTo.Contains(a):
		return netip.AddrFrom4([4]byte(s[2:6])), true
	}
	return netip.Addr{}, false
}

// Classify returns what a is and the block that says so (the zero Prefix
// for a public address). An address that carries an IPv4 is what that
// IPv4 is.
func Classify(a netip.Addr) (AddressKind, netip.Prefix, string) {
	if v4, ok := embeddedIPv4(a); ok {
		a = v4
	}
	a = a.WithZone("")
	for _, bl := range blocks {
		if bl.prefix.Contains(a) {
			return bl.kind, bl.prefix, bl.name
		}
	}
	return AddressPublic, netip.Prefix{}, ""
}

// AddressError is an address the policy refuses. Private says it is
// refused only for want of an admin's choice or an allow-list entry.
type AddressError struct {
	Addr    netip.Addr
	Private bool
	Range   string // the block's name: "loopback", "cloud metadata", …
}

func (e *AddressError) Error() string {
	return "webhooks: address " + e.Addr.String() + " is " + e.Range + ": not allowed"
}

// Is makes every AddressError match errBlockedAddress.
func (e *AddressError) Is(target error) bool { return target == errBlockedAddress }

// errBlockedAddress is matched by every *AddressError, through the dial
// errors that wrap it.
var errBlockedAddress = errors.New("webhooks: address not allowed")

// Resolver resolves a host name to its addresses (net.DefaultResolver).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// AddressPolicy decides which addresses webhooks may reach, at PUT and
// again for every address a delivery dials.
type AddressPolicy struct {
	// Allow are always allowed (TOLLGATE_WEBHOOK_ALLOW): a private address
	// in any entry; a refused one (a metadata address, say) only in an
	// entry inside its block, so that 0.0.0.0/0 or 10.0.0.0/8 never opens
	// 169.254.169.254. An address carrying an IPv4 is matched by that
	// IPv4.
	Allow []netip.Prefix
	// Resolver resolves host names at PUT and at delivery; default
	// net.DefaultResolver.
	Resolver Resolver
}

// Check returns nil when a may be reached by a webhook set with private
// allowed or not, or an *AddressError saying why not.
func (p AddressPolicy) Check(a netip.Addr, privateAllowed bool) error {
	kind, bl, name := Classify(a)
	if kind == AddressPublic || kind == AddressPrivate && privateAllowed {
		return nil
	}
	match := a.WithZone("")
	if v4, ok := embeddedIPv4(a); ok {
		match = v4
	}
	for _, allow := range p.Allow {
		if !allow.Contains(match) {
			continue
		}
		if kind == AddressPrivate || bl.Contains(allow.Addr()) && allow.Bits() >= bl.Bits() {
			return nil
		}
	}
	return &AddressError{Addr: a, Private: kind == AddressPrivate, Range: name}
}

// ParseAllow reads TOLLGATE_WEBHOOK_ALLOW: CIDRs or single addresses,
// separated by commas or spaces. It returns an error naming the first
// entry it cannot read.
func ParseAllow(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil || a.Zone() != "" {
				return nil, fmt.Errorf("TOLLGATE_WEBHOOK_ALLOW: %q is not an address or a CIDR", f)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		pr, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("TOLLGATE_WEBHOOK_ALLOW: %q is not an address or a CIDR", f)
		}
		if pr.Addr().Is4In6() {
			if pr.Bits() < 96 {
				return nil, fmt.Errorf("TOLLGATE_WEBHOOK_ALLOW: %q mixes IPv4-mapped and IPv6 addresses: write the IPv4 CIDR", f)
			}
			pr = netip.PrefixFrom(pr.Addr().Unmap(), pr.Bits()-96)
		}
		if pr != pr.Masked() {
			return nil, fmt.Errorf("TOLLGATE_WEBHOOK_ALLOW: %q has bits set past its length: did you mean %s?", f, pr.Masked())
		}
		out = append(out, pr)
	}
	return out, nil
}

// resolveTimeout bounds the name resolution of a PUT.
const resolveTimeout = 3 * time.Second

// CheckHost returns an *AddressError when host, an address or a name, is
// or resolves to an address Check refuses. A name that does not resolve
// is accepted: DNS may be late or down, and every address a delivery
// dials is checked again (dialer), so an answer that changes after the
// PUT, or a name that starts resolving, gains nothing.
func (p AddressPolicy) CheckHost(ctx context.Context, host string, privateAllowed bool) error {
	if a, err := netip.ParseAddr(host); err == nil {
		return p.Check(a, privateAllowed)
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	addrs, err := p.resolver().LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if err := p.Check(a, privateAllowed); err != nil {
			return err
		}
	}
	return nil
}

func (p AddressPolicy) resolver() Resolver {
	if p.Resolver == nil {
		return net.DefaultResolver
	}
	return p.Resolver
}
