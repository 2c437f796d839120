package main

import "testing"

// What modules list prints of a server's text cannot drive the terminal, whatever
// the server sent.
func TestPrintableEscapesWhatATerminalObeys(t *testing.T) {
	for in, want := range map[string]string{
		`exposed name "m_bad name" is not valid`: `exposed name "m_bad name" is not valid`,
		`already\u001bescaped`:                   `already\u001bescaped`,
		"raw\x1b[2Jclear":                        `raw\u001b[2Jclear`,
		"csi\u009bJ":                             `csi\u009bJ`,
		"rtl\u202eevil":                          `rtl\u202eevil`,
		"bad\xffbyte":                            "bad\ufffdbyte",
		"tag\U000e0041":                          `tag\U000e0041`,
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
}
