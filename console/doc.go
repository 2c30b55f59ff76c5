// Package console is Tollgate's web console: a read-only browser front end
// for support, finance and operators, served by the same binary as the API
// and using the same API keys and roles.
//
// The console owns three things and nothing more:
//
//   - the embedded front end (assets/: plain HTML, JavaScript and CSS, no
//     build step, no network access at run time);
//   - sign-in sessions: a key is exchanged once for an opaque session id in
//     an HttpOnly, SameSite=Strict cookie. The key stays in this process's
//     memory for the session's life and is never sent back to the browser,
//     so script on the page cannot leak it;
//   - a proxy from /console/api/... into the API handler, in process, which
//     adds the session's key as the bearer token.
//
// The console decides nothing about access. Every read goes through the
// API with the signed-in key, so the console can show nothing that the API
// would not answer to the same key; the role only chooses which pages the
// front end offers. For the same reason the proxy forwards reads only
// (GET and HEAD): the console changes no data.
//
// State-changing requests to the console itself (signing out) must carry
// the session's CSRF token in X-CSRF-Token, and cross-origin browser
// requests that change state are refused outright (http.CrossOriginProtection),
// which also covers signing in.
package console
