package redact_test

import (
	"fmt"
	"regexp"

	"github.com/tollgate/tollgate/redact"
)

func ExampleRedactor_Record() {
	// Built once at start-up and shared.
	r, err := redact.New(redact.Rule{Name: "employee_id", Pattern: regexp.MustCompile(`EMP-\d{6}`)})
	if err != nil {
		panic(err)
	}

	// One Session per record: request and response share the numbering.
	s := r.Record()
	fmt.Println(s.Text("Ask ann@example.com (EMP-004217) to pay DE89 3704 0044 0532 0130 00."))
	fmt.Println(s.Text("Done: ann@example.com was asked; bob@example.com is in copy."))
	fmt.Println(s.Counts())
	// Output:
	// Ask [EMAIL_1] ([EMPLOYEE_ID_1]) to pay [IBAN_1].
	// Done: [EMAIL_1] was asked; [EMAIL_2] is in copy.
	// map[EMAIL:2 EMPLOYEE_ID:1 IBAN:1]
}

func ExampleDigest() {
	key := []byte("a secret of at least 32 random bytes!") // from configuration, never a literal
	logged := redact.Digest(key, "idem-2026-11-30-0042")
	// Support, holding the key, can tell whether a key they were given is
	// the one logged, without the log ever holding it.
	fmt.Println(len(logged), redact.Digest(key, "idem-2026-11-30-0042") == logged, redact.Digest(key, "idem-2026-11-30-0043") == logged)
	// Output:
	// 32 true false
}
