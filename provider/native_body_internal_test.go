package provider

import "testing"

func TestAnthropicSpliceMember(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ body, want string }{
		{`{"model":"a","x":1}`, `{"model":"b","x":1}`},
		{`{ "x" : [1, {"model":"a"}] , "model" :  "a" }`, `{ "x" : [1, {"model":"a"}] , "model" :  "b" }`},
		{`{"x":{"model":"a"}}`, `{"model":"b","x":{"model":"a"}}`},
		{`{ }`, `{"model":"b" }`},
		{`{"model":null}`, `{"model":"b"}`},
	} {
		got, err := SpliceMember([]byte(tt.body), "model", []byte(`"b"`))
		if err != nil || string(got) != tt.want {
			t.Errorf("SpliceMember(%s) = %s (%v), want %s", tt.body, got, err, tt.want)
		}
	}
	for _, bad := range []string{`[1]`, `"x"`, `{"a":1} {}`, `{"a":`} {
		if _, err := SpliceMember([]byte(bad), "model", []byte(`"b"`)); err == nil {
			t.Errorf("SpliceMember(%s) succeeded, want an error", bad)
		}
	}
}
