package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	sessionCookie = "tollgate_console"
	cookiePath    = "/console"
	csrfHeader    = "X-CSRF-Token"
	// maxSessions bounds the memory a flood of sign-ins can take; only
	// holders of a valid key can create sessions at all.
	maxSessions = 10000
	// MaxSessionsPerKey is how many live sessions one key may hold (a few
	// browsers and machines); signing in once more ends the key's oldest
	// session, so one key can never fill the table and lock others out.
	MaxSessionsPerKey = 5
	maxSignInBody     = 8 << 10
	maxKeyLen         = 512
)

var errTooManySessions = errors.New("console: too many sessions")

// session is one sign-in. key is the API key in clear: it lives only here,
// in memory, and only for the session's life.
type session struct {
	key       string
	principal Principal
	csrf      string
	expires   time.Time
}

// sessions is the in-memory session table. Sessions do not survive a
// restart, nor move between instances: signing in again is the cure, and
// no key is ever written anywhere.
type sessions struct {
	now  func() time.Time
	mu   sync.Mutex
	byID map[string]session
}

func newSessions(now func() time.Time) *sessions {
	return &sessions{now: now, byID: make(map[string]session)}
}

// create stores a new session for key and returns its id, or
// errTooManySessions when the table is full of live sessions. A key that
// already holds MaxSessionsPerKey live sessions loses its oldest.
func (s *sessions) create(key string, p Principal) (string, session, error) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var mine []string // the key's live sessions
	for id, sess := range s.byID {
		switch {
		case !now.Before(sess.expires):
			delete(s.byID, id)
		case sess.key == key:
			mine = append(mine, id)
		}
	}
	// The oldest session expires first: every session lives SessionTTL.
	slices.SortFunc(mine, func(a, b string) int { return s.byID[a].expires.Compare(s.byID[b].expires) })
	for len(mine) >= MaxSessionsPerKey {
		delete(s.byID, mine[0])
		mine = mine[1:]
	}
	if len(s.byID) >= maxSessions {
		return "", session{}, errTooManySessions
	}
	// rand.Text is 128 random bits: unguessable ids and CSRF tokens.
	id := rand.Text()
	sess := session{key: key, principal: p, csrf: rand.Text(), expires: now.Add(SessionTTL)}
	s.byID[id] = sess
	return id, sess, nil
}

// get returns the live session with id; an expired one is removed and
// reported as absent.
func (s *sessions) get(id string) (session, bool) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.byID[id]
	if !ok {
		return session{}, false
	}
	if !now.Before(sess.expires) {
		delete(s.byID, id)
		return session{}, false
	}
	return sess, true
}

func (s *sessions) delete(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, id)
}

// sessionView is what the browser learns about its session: who it is,
// never the key.
type sessionView struct {
	OwnerID   string    `json:"owner_id"`
	Role      string    `json:"role"`
	Workload  string    `json:"workload"`
	ExpiresAt time.Time `json:"expires_at"`
	// CSRFToken must be sent back in X-CSRF-Token on every request that
	// changes state. Only same-origin script can read this answer.
	CSRFToken       string `json:"csrf_token"`
	AlertThresholds []int  `json:"alert_thresholds"`
}

func (c *console) view(sess session) sessionView {
	return sessionView{
		OwnerID:         sess.principal.OwnerID,
		Role:            sess.principal.Role,
		Workload:        sess.principal.Workload,
		ExpiresAt:       sess.expires.UTC(),
		CSRFToken:       sess.csrf,
		AlertThresholds: c.thresholds,
	}
}

// current returns the request's live session and its id.
func (c *console) current(r *http.Request) (string, session, bool) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" {
		return "", session{}, false
	}
	sess, ok := c.sessions.get(ck.Value)
	return ck.Value, sess, ok
}

func (c *console) cookie(id string, expires time.Time) *http.Cookie {
	return &http.Cookie{
		Name:     sessionCookie,
		Value:    id,
		Path:     cookiePath,
		Expires:  expires.UTC(),
		MaxAge:   int(SessionTTL / time.Second),
		HttpOnly: true,
		Secure:   c.secure,
		SameSite: http.SameSiteStrictMode,
	}
}

func (c *console) clearCookie(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{
		Name:     sessionCookie,
		Path:     cookiePath,
		MaxAge:   -1,
		HttpOnly: true,
		Secure:   c.secure,
		SameSite: http.SameSiteStrictMode,
	})
}

// getSession answers GET /console/session: the signed-in principal, for
// the front end to choose its pages, or 401. The key is checked again, so
// a key revoked since sign-in ends its session here too (503 when the key
// store cannot answer).
func (c *console) getSession(w http.ResponseWriter, r *http.Request) {
	id, sess, ok := c.current(r)
	if ok {
		_, err := c.auth(r.Context(), sess.key)
		switch {
		case errors.Is(err, ErrUnauthenticated):
			c.sessions.delete(id)
			ok = false
		case err != nil:
			c.log.Error("console: session check could not check the key", slog.String("error", err.Error()))
			writeProblem(w, http.StatusServiceUnavailable, "unavailable", "The key could not be checked just now; try again.")
			return
		}
	}
	if !ok {
		c.clearCookie(w)
		writeProblem(w, http.StatusUnauthorized, "unauthorized", "Not signed in, or the session has expired.")
		return
	}
	writeJSON(w, http.StatusOK, c.view(sess))
}

// signIn answers POST /console/session with {"api_key": "..."} (JSON or a
// form field of that name): a new session and its cookie, 401 for an
// unknown key, 429 for an address that failed too often (Config.Limiter),
// 503 when the key store cannot answer.
func (c *console) signIn(w http.ResponseWriter, r *http.Request) {
	addr := clientAddr(r)
	if blocked, wait := c.limit.Blocked(addr); blocked {
		secs := max(int(wait.Round(time.Second)/time.Second), 1)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		writeProblem(w, http.StatusTooManyRequests, "rate_limited",
			"Too many failed sign-ins from this address; wait "+wait.Round(time.Second).String()+".")
		return
	}
	key, status, detail := readKey(w, r)
	if status == http.StatusUnauthorized {
		c.limit.Failed(addr)
	}
	if status != 0 {
		writeProblem(w, status, codeOf(status), detail)
		return
	}
	p, err := c.auth(r.Context(), key)
	switch {
	case errors.Is(err, ErrUnauthenticated):
		c.limit.Failed(addr)
		writeProblem(w, http.StatusUnauthorized, "unauthorized", "That API key is unknown or revoked.")
		return
	case err != nil:
		c.log.Error("console: sign-in could not check the key", slog.String("error", err.Error()))
		writeProblem(w, http.StatusServiceUnavailable, "unavailable", "The key could not be checked just now; try again.")
		return
	}
	if old, _, ok := c.current(r); ok {
		c.sessions.delete(old)
	}
	id, sess, err := c.sessions.create(key, p)
	if err != nil {
		writeProblem(w, http.StatusServiceUnavailable, "unavailable", "Too many open sessions; try again later.")
		return
	}
	http.SetCookie(w, c.cookie(id, sess.expires))
	writeJSON(w, http.StatusCreated, c.view(sess))
}

// readKey reads the API key from a sign-in body. A non-zero status is the
// answer to give instead.
func readKey(w http.ResponseWriter, r *http.Request) (key string, status int, detail string) {
	r.Body = http.MaxBytesReader(w, r.Body, maxSignInBody)
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch mt {
	case "application/json":
		var in struct {
			APIKey string `json:"api_key"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			return "", http.StatusBadRequest, "The body must be a JSON object with an api_key."
		}
		key = in.APIKey
	case "application/x-www-form-urlencoded":
		if err := r.ParseForm(); err != nil {
			return "", http.StatusBadRequest, "The form could not be read."
		}
		key = r.PostForm.Get("api_key")
	default:
		return "", http.StatusUnsupportedMediaType, "Send the key as JSON or as a form field named api_key."
	}
	key = strings.TrimSpace(key)
	switch {
	case key == "":
		return "", http.StatusBadRequest, "An API key is required."
	case len(key) > maxKeyLen:
		return "", http.StatusUnauthorized, "That API key is unknown or revoked."
	}
	return key, 0, ""
}

func codeOf(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "unauthorized"
	case http.StatusUnsupportedMediaType:
		return "unsupported_media_type"
	default:
		return "invalid_request"
	}
}

// signOut answers DELETE /console/session: 204 and the session is gone.
// It needs the session's CSRF token (403 without), so that no other site
// can sign a user out.
func (c *console) signOut(w http.ResponseWriter, r *http.Request) {
	id, sess, ok := c.current(r)
	if !ok {
		c.clearCookie(w)
		writeProblem(w, http.StatusUnauthorized, "unauthorized", "Not signed in, or the session has expired.")
		return
	}
	if !validCSRF(r, sess) {
		writeProblem(w, http.StatusForbidden, "forbidden", "The X-CSRF-Token header is missing or wrong.")
		return
	}
	c.sessions.delete(id)
	c.clearCookie(w)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

func validCSRF(r *http.Request, sess session) bool {
	got := r.Header.Get(csrfHeader)
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(sess.csrf)) == 1
}

// clientAddr is the address failed sign-ins are counted against: the
// connection's, never a header a client can forge (as the API counts).
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
