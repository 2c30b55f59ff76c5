package stats

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Table lays figures out in aligned columns, as the reports print them:
// the leading columns (what was measured) aligned left, the others (the
// figures) aligned right, two spaces apart.
type Table struct {
	// Rule, when set, draws a line of dashes under the header as wide as
	// the table.
	Rule bool
	// Names is how many leading columns name what was measured and are
	// aligned left; the first always is.
	Names int
	rows  [][]string
}

// NewTable returns a table whose first row is header. The zero Table
// has no header: its rows are all figures.
func NewTable(header ...string) *Table { return &Table{rows: [][]string{header}} }

// Row adds a row of cells.
func (t *Table) Row(cells ...string) { t.rows = append(t.rows, cells) }

// Rowf adds a row formatted as fmt.Sprintf(format, args...) does, a tab
// between two cells.
func (t *Table) Rowf(format string, args ...any) {
	t.Row(strings.Split(fmt.Sprintf(format, args...), "\t")...)
}

// Write prints the table to w, indenting every line by indent. It returns
// the first write error.
func (t *Table) Write(w io.Writer, indent string) error {
	var widths []int
	for _, r := range t.rows {
		for i, c := range r {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	total := 0
	for _, wd := range widths {
		total += wd
	}
	total += 2 * max(len(widths)-1, 0)
	var b strings.Builder
	for n, r := range t.rows {
		b.WriteString(indent)
		for i, c := range r {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i > 0 {
				b.WriteString("  ")
			}
			switch {
			case i >= max(t.Names, 1):
				b.WriteString(pad + c)
			case i < len(r)-1:
				b.WriteString(c + pad)
			default:
				b.WriteString(c) // no trailing blanks
			}
		}
		b.WriteString("\n")
		if n == 0 && t.Rule {
			b.WriteString(indent + strings.Repeat("-", total) + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
