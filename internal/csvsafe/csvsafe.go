// Package csvsafe writes CSV that a spreadsheet opens as data, never as
// formulas: every CSV Tollgate serves goes through its Writer. Cells hold
// client-chosen text (workloads, model names), and a cell that starts with
// =, +, -, @, a tab or a carriage return is run as a formula by Excel,
// LibreOffice and Google Sheets ("CSV injection"). Following OWASP's
// guidance, such a cell is prefixed with a single quote, which spreadsheets
// show as text; a plain number ("-12", "0.5") is left as it is.
package csvsafe

import (
	"encoding/csv"
	"io"
)

// Writer is a csv.Writer whose Write neutralises formula cells.
type Writer struct {
	*csv.Writer
}

// NewWriter returns a Writer writing to w.
func NewWriter(w io.Writer) *Writer { return &Writer{csv.NewWriter(w)} }

// Write writes one record, each cell through Cell. It returns the
// underlying csv.Writer's error.
func (w *Writer) Write(record []string) error {
	out := make([]string, len(record))
	for i, c := range record {
		out[i] = Cell(c)
	}
	return w.Writer.Write(out)
}

// Cell returns s as a spreadsheet shows it as text: prefixed with a single
// quote when it starts with a formula trigger (= + - @ tab CR), unless s
// is a plain decimal number.
func Cell(s string) string {
	if s == "" || !isTrigger(s[0]) || isNumber(s) {
		return s
	}
	return "'" + s
}

func isTrigger(c byte) bool {
	switch c {
	case '=', '+', '-', '@', '\t', '\r':
		return true
	}
	return false
}

// isNumber reports whether s is an optional sign, digits, and an optional
// fraction: what strconv writes, and what no spreadsheet reads as a formula.
func isNumber(s string) bool {
	if s[0] == '-' || s[0] == '+' {
		s = s[1:]
	}
	digits, dot := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.' && !dot && digits > 0:
			dot = true
		default:
			return false
		}
	}
	return digits > 0 && s[len(s)-1] != '.'
}
