package webhooks

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// secretPrefix starts every secret, as the Standard Webhooks
// specification's libraries expect.
const secretPrefix = "whsec_"

// newSecret returns a fresh secret: whsec_ and 32 random bytes in base64.
func newSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("webhooks: random secret: %v", err))
	}
	return secretPrefix + base64.StdEncoding.EncodeToString(b)
}

// signature returns the webhook-signature header's value for one attempt:
// "v1,<base64 HMAC-SHA256 of id.timestamp.body>" for each secret,
// separated by spaces (the specification's form for several keys). A
// secret that is not whsec_ and base64 is skipped; it returns an error if
// none is left.
func signature(secrets []string, id string, at time.Time, body []byte) (string, error) {
	var sigs []string
	for _, s := range secrets {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, secretPrefix))
		if err != nil || !strings.HasPrefix(s, secretPrefix) {
			continue
		}
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id + "." + strconv.FormatInt(at.Unix(), 10) + "."))
		mac.Write(body)
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	}
	if len(sigs) == 0 {
		return "", fmt.Errorf("webhooks: no usable secret")
	}
	return strings.Join(sigs, " "), nil
}
