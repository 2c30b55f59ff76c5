// Package docs holds Tollgate's reference documents (Markdown). It has no
// code; its test holds every relative link of README.md and of these
// documents to a file that exists and a heading that does.
package docs
