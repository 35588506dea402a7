// Prints the non-ASCII character classes of src/grammask/grammar/builtin/go.lark, computed from
// the Go toolchain's own unicode tables, one per line as Python regex class contents:
//
//	letters     unicode.Letter (Lu Ll Lt Lm Lo): identifier letters besides [a-zA-Z_]
//	digits      unicode.Digit (Nd): identifier digits besides [0-9]
//	importpath  unicode.IsGraphic and not unicode.IsSpace, minus U+FFFD and U+FEFF: import path characters
//
// Run: go run scripts/go_unicode_classes.go (tests/test_go_grammar.py checks go.lark against it).
package main

import (
	"fmt"
	"strings"
	"unicode"
)

func escape(r rune) string {
	if r <= 0xFFFF {
		return fmt.Sprintf("\\u%04x", r)
	}
	return fmt.Sprintf("\\U%08x", r)
}

// class lists the runes from U+0080 up for which in is true, as ranges.
func class(in func(rune) bool) string {
	var b strings.Builder
	start := rune(-1)
	for r := rune(0x80); r <= unicode.MaxRune+1; r++ {
		if r <= unicode.MaxRune && in(r) {
			if start < 0 {
				start = r
			}
			continue
		}
		if start >= 0 {
			b.WriteString(escape(start))
			if r-1 > start {
				b.WriteString("-" + escape(r-1))
			}
			start = -1
		}
	}
	return b.String()
}

func main() {
	fmt.Println(class(func(r rune) bool { return unicode.IsLetter(r) }))
	fmt.Println(class(func(r rune) bool { return unicode.IsDigit(r) }))
	fmt.Println(class(func(r rune) bool {
		return unicode.IsGraphic(r) && !unicode.IsSpace(r) && r != 0xFFFD && r != 0xFEFF
	}))
}
