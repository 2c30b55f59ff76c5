// Package docs holds Tollgate's reference documents (Markdown). It has no
// code; its tests hold every relative link of README.md and of these
// documents to a file that exists and a heading that does, and run the
// README's and the walkthrough's shell blocks against `make run`'s service,
// holding each to the output the document shows.
package docs
