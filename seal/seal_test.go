package seal

import (
	"bytes"
	"encoding/base64"
	"errors"
	"testing"

	"github.com/tollgate/tollgate/internal/testdb"
)

func TestSealOpens(t *testing.T) {
	t.Parallel()
	s, err := New(bytes.Repeat([]byte{3}, 32))
	if err != nil {
		t.Fatal(err)
	}
	other, err := New(bytes.Repeat([]byte{4}, 32))
	if err != nil {
		t.Fatal(err)
	}
	sealed := s.Seal([]byte("the output"), []byte("row-1"))
	if got, err := s.Open(sealed, []byte("row-1")); err != nil || string(got) != "the output" {
		t.Fatalf("Open = %q, %v; want the output", got, err)
	}
	if bytes.Contains(sealed, []byte("the output")) {
		t.Error("the sealed body holds the text in clear")
	}
	versioned := append([]byte{version + 1}, sealed[1:]...)
	for name, c := range map[string]struct {
		s      *Sealer
		sealed []byte
		ad     string
	}{
		"another row":    {s, sealed, "row-2"},
		"another key":    {other, sealed, "row-1"},
		"truncated":      {s, sealed[:5], "row-1"},
		"another format": {s, versioned, "row-1"},
	} {
		if _, err := c.s.Open(c.sealed, []byte(c.ad)); !errors.Is(err, ErrCannotOpen) {
			t.Errorf("%s: Open = %v, want ErrCannotOpen", name, err)
		}
	}
}

func TestNewRefusesAKeyOfAnotherLength(t *testing.T) {
	t.Parallel()
	if _, err := New(make([]byte, 16)); err == nil {
		t.Error("New(16 bytes) = nil error, want one")
	}
}

func TestDigestKeyIsNotTheDataKey(t *testing.T) {
	t.Parallel()
	key := bytes.Repeat([]byte{5}, 32)
	s, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.DigestKey()) != 32 || bytes.Equal(s.DigestKey(), key) {
		t.Errorf("DigestKey = %x, want 32 bytes derived from, not equal to, the data key", s.DigestKey())
	}
}

func TestDataKeyFromTheEnvironment(t *testing.T) {
	t.Parallel()
	want := bytes.Repeat([]byte{6}, 32)
	got, fromDB, err := DataKey(t.Context(), nil, base64.StdEncoding.EncodeToString(want))
	if err != nil || fromDB || !bytes.Equal(got, want) {
		t.Errorf("DataKey = %x, %v, %v; want the key, not from the database", got, fromDB, err)
	}
	for _, env := range []string{"not base64!", base64.StdEncoding.EncodeToString(make([]byte, 31))} {
		if _, _, err := DataKey(t.Context(), nil, env); err == nil {
			t.Errorf("DataKey(%q) = nil error, want one", env)
		}
	}
}

func TestDataKeyFromTheDatabaseIsSharedByEveryCaller(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.NewPool(t)
	first, fromDB, err := DataKey(t.Context(), pool, "")
	if err != nil || !fromDB || len(first) != 32 {
		t.Fatalf("DataKey = %x, %v, %v; want a 32-byte key from the database", first, fromDB, err)
	}
	again, _, err := DataKey(t.Context(), pool, "")
	if err != nil || !bytes.Equal(again, first) {
		t.Errorf("DataKey again = %x, %v; want the first key %x", again, err, first)
	}
}
