package redact

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// benchmarkMessage returns a realistic ~4 KiB model request: a support
// question with a log excerpt, a stack trace and code, full of numbers,
// dates, ids and versions that must survive. With secrets it also carries
// one value of every kind.
func benchmarkMessage(secrets bool) string {
	var b strings.Builder
	b.WriteString(`You are a support assistant for an online shop. Answer the customer's
question below using the order history and the log excerpt. Be concise,
do not invent order numbers, and quote timestamps exactly as given.

Customer message:
Hi, I ordered a standing desk (order 1002003004, placed 2026-11-30 at
14:32) and a monitor arm (order 1002003005). The desk arrived on
01.12.2026 but two of the 12 screws were missing and the manual (v3.2.1,
page 14) refers to part B-17 which is not in the box. The arm has not
shipped yet. Tracking says 1Z999AA10123456784. Can you send the parts
and tell me when the arm ships? I need it before 2026-12-15.
`)
	if secrets {
		b.WriteString(`You can reach me at ann.example+shop@example.com or +44 20 7946 0958,
my card was 4111 1111 1111 1111 and refunds can go to
DE89 3704 0044 0532 0130 00. Our integration uses ` + fake("sk-proj-", 64, 50) + `
and the webhook sends Authorization: Bearer ` + fake("", 40, 51) + `
`)
	}
	b.WriteString(`
Order history (JSON):
[{"id":1002003004,"sku":"DESK-160x80-OAK","qty":1,"price":"549.00","currency":"EUR",
  "status":"delivered","created_at":"2026-11-30T14:32:11.482Z","updated_at":1764599531482,
  "warehouse":"FRA-2","carrier":"UPS","weight_kg":38.5,"dimensions":"160x80x12"},
 {"id":1002003005,"sku":"ARM-DUAL-27","qty":1,"price":"89.90","currency":"EUR",
  "status":"backordered","created_at":"2026-11-30T14:32:11.482Z","eta":"2026-12-09",
  "warehouse":"FRA-2","supplier_ref":"PO-2026-11-4471","request_id":"550e8400-e29b-41d4-a716-446655440000"}]

Log excerpt:
2026-11-30T14:32:11.482Z INFO  checkout order=1002003004 total=549.00 items=1 region=eu-central-1
2026-11-30T14:32:11.907Z INFO  payment authorised order=1002003004 psp_ref=8815 7642 0019 amount=54900
2026-12-01T08:02:45.120Z INFO  shipment created order=1002003004 parcels=2 weight=38.5kg
2026-12-01T08:02:45.311Z WARN  inventory low sku=SCREW-M6x16 on_hand=3 reorder_point=50
2026-12-02T10:15:00.000Z ERROR backorder sku=ARM-DUAL-27 supplier=ACME status=503 retry_in=3600s
2026-12-02T10:15:00.004Z DEBUG http GET /v2/suppliers/acme/stock?sku=ARM-DUAL-27 took=1.245s attempt=3/5

Stack trace from the supplier client:
panic: runtime error: index out of range [5] with length 5
goroutine 4711 [running]:
shop/internal/supplier.(*Client).Stock(0xc000123450, {0x1a2b3c0, 0xc0001e2000}, {0xc00001c0a0, 0xb})
	/src/internal/supplier/client.go:182 +0x3f4
shop/internal/orders.(*Service).Backorder(0xc0000a4000, {0x1a2b3c0, 0xc0001e2000}, 0x3bb9c3fc)
	/src/internal/orders/backorder.go:57 +0x1c8

Relevant code:
func (c *Client) Stock(ctx context.Context, sku string) (int, error) {
	parts := strings.SplitN(sku, "-", 5)
	for i := 0; i <= len(parts); i++ { // off by one, see ticket SHOP-2291
		if parts[i] == "" {
			return 0, fmt.Errorf("supplier: bad sku %q", sku)
		}
	}
	return c.lookup(ctx, parts[0], parts[1])
}

Previous conversation:
Customer (2026-11-28 09:12): Is the DESK-160x80-OAK compatible with the
ARM-DUAL-27? My monitors are 2x 27" at 6.5 kg each, VESA 100x100.
Agent (2026-11-28 09:40): Yes, the arm supports 2-9 kg per screen and desk
tops 12-45 mm thick; the desk top is 25 mm. Firmware 2.4.0 of the desk
controller fixes the height drift reported in ticket SHOP-2104 (build
20261115.3, checksum 9f86d081884c7d65). Press and hold M + 1 for 5 s to
save a preset; heights range from 62 to 127 cm in 0.1 cm steps.
Customer (2026-11-28 09:47): Great, ordering now. Will it fit through a
door of 80 cm? The box is 165 x 85 x 15 cm per the product page, 41.2 kg.
Agent (2026-11-28 10:02): The box fits diagonally; two people are advised.
Stock levels at 10:00 UTC: FRA-2 14 units, AMS-1 3 units, WAW-1 0 units;
expected restock 2026-12-05 (PO-2026-11-4471, 120 units, ETA week 49).

Opening hours: Monday to Friday 09:00-18:00 CET, phone support on weekdays
only. Replacement parts usually ship within 2-3 business days (SLA 99.5%).
Please answer in English and keep the reply under 150 words. Reference the
order numbers and the expected shipping date of the arm if it is known.
`)
	return b.String()
}

func BenchmarkText(b *testing.B) {
	r := newRedactor(b)
	for _, bc := range []struct {
		name    string
		secrets bool
	}{{"clean", false}, {"secrets", true}} {
		in := benchmarkMessage(bc.secrets)
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				r.Record().Text(in)
			}
		})
	}
}

// TestBenchmarkMessage keeps the benchmark honest: the clean message must
// survive whole, and the other must lose exactly its planted values.
func TestBenchmarkMessage(t *testing.T) {
	t.Parallel()
	r := newRedactor(t)
	clean := benchmarkMessage(false)
	if n := len(clean); n < 3500 || n > 4600 {
		t.Errorf("clean message is %d bytes, want about 4 KiB", n)
	}
	if got := r.Record().Text(clean); got != clean {
		t.Errorf("clean message changed:\n%s", got)
	}
	s := r.Record()
	s.Text(benchmarkMessage(true))
	want := map[string]int{KindEmail: 1, KindPhone: 1, KindCard: 1, KindIBAN: 1, KindSecret: 2}
	if diff := cmp.Diff(want, s.Counts()); diff != "" {
		t.Errorf("Counts mismatch (-want +got):\n%s", diff)
	}
}

// BenchmarkTextNearMisses feeds texts made of nothing but near-misses for
// one rule, at two sizes: time per byte should not grow with size.
func BenchmarkTextNearMisses(b *testing.B) {
	r := newRedactor(b)
	var emails strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&emails, "u%d@example.com ", i)
	}
	for _, bc := range []struct{ name, unit string }{
		{"sk", "-sk-"},
		{"jwt", "-eyJaaaaaaaaaaa."},
		{"bearer", "Bearer x."},
		{"placeholder", "[SECRET_"},
		{"phone", "(415) "},
		{"card", "4111 "},
		{"distinct-emails", emails.String()},
	} {
		for _, size := range []int{16 << 10, 64 << 10} {
			in := strings.Repeat(bc.unit, size/len(bc.unit)+1)[:size]
			b.Run(fmt.Sprintf("%s/%dKiB", bc.name, size>>10), func(b *testing.B) {
				b.SetBytes(int64(len(in)))
				for b.Loop() {
					r.Record().Text(in)
				}
			})
		}
	}
}

// BenchmarkTextScale redacts 4 KiB to 1 MiB of prose, numbers, values to
// replace and near-misses: MB/s must stay flat as the size grows
// (TestLinearWork checks the same without timing).
func BenchmarkTextScale(b *testing.B) {
	r := newRedactor(b)
	for _, kind := range scaleKinds {
		for _, size := range []int{4 << 10, 256 << 10, 1 << 20} {
			in := scaleInput(kind, size)
			b.Run(fmt.Sprintf("%s/%dKiB", kind, size>>10), func(b *testing.B) {
				b.SetBytes(int64(size))
				for b.Loop() {
					r.Record().Text(in)
				}
			})
		}
	}
}
