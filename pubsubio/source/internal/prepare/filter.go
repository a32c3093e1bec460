package prepare

import (
	"fmt"
	"strings"
)

// filterSyntaxError says where a subscription filter breaks the shape of
// Pub/Sub's filter language, "" if it does not. It refuses only what
// cannot be a filter: an unterminated string, unbalanced parentheses, a
// missing operand, a condition that is not on attributes, a comparison
// with something other than a string. Pub/Sub judges everything else when
// the subscription is created (https://cloud.google.com/pubsub/docs/filtering):
// a guessed rule would refuse filters it accepts.
//
// The shapes:
//
//	expr      = unary { ("AND" | "OR") unary }
//	unary     = ("NOT" | "-") unary | "(" expr ")" | condition
//	condition = "attributes" ":" key
//	          | "attributes" "." key ("=" | "!=") string
//	          | name "(" arg { "," arg } ")"   e.g. hasPrefix(attributes.k, "p")
//	arg       = "attributes" "." key | string
//	key       = word | string
func filterSyntaxError(filter string) string {
	p := filterParser{in: filter}
	p.next()
	if err := p.expr(); err != "" {
		return err
	}
	if p.tok.kind != tokEnd {
		return p.unexpected("AND, OR or the end")
	}
	return ""
}

type filterToken struct {
	kind tokenKind
	text string
	at   int // byte offset in the filter
}

type tokenKind uint8

const (
	tokEnd tokenKind = iota
	tokWord
	tokString
	tokPunct // ( ) , : . = != -
	tokBad   // a byte no filter holds, or an unterminated string
)

type filterParser struct {
	in  string
	pos int
	tok filterToken
}

// next reads the next token into p.tok.
func (p *filterParser) next() {
	for p.pos < len(p.in) && strings.IndexByte(" \t\r\n", p.in[p.pos]) >= 0 {
		p.pos++
	}
	start := p.pos
	if p.pos == len(p.in) {
		p.tok = filterToken{kind: tokEnd, at: start}
		return
	}
	c := p.in[p.pos]
	switch {
	case c == '"':
		p.pos++
		for p.pos < len(p.in) && p.in[p.pos] != '"' {
			if p.in[p.pos] == '\\' {
				p.pos++
			}
			p.pos++
		}
		if p.pos >= len(p.in) {
			p.tok = filterToken{kind: tokBad, text: "an unterminated string", at: start}
			return
		}
		p.pos++
		p.tok = filterToken{kind: tokString, text: p.in[start:p.pos], at: start}
	case c == '!' && strings.HasPrefix(p.in[p.pos:], "!="):
		p.pos += 2
		p.tok = filterToken{kind: tokPunct, text: "!=", at: start}
	case strings.IndexByte("(),:.=-", c) >= 0:
		p.pos++
		p.tok = filterToken{kind: tokPunct, text: string(c), at: start}
	case isWordByte(c):
		for p.pos < len(p.in) && (isWordByte(p.in[p.pos]) || p.in[p.pos] == '-') {
			p.pos++
		}
		p.tok = filterToken{kind: tokWord, text: p.in[start:p.pos], at: start}
	default:
		p.tok = filterToken{kind: tokBad, text: fmt.Sprintf("%q", rune(c)), at: start}
	}
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

func (p *filterParser) is(kind tokenKind, text string) bool {
	return p.tok.kind == kind && (text == "" || p.tok.text == text)
}

func (p *filterParser) keyword(k string) bool {
	return p.tok.kind == tokWord && strings.EqualFold(p.tok.text, k)
}

// expect reads the punctuation text, or says that want was expected.
func (p *filterParser) expect(text, want string) string {
	if !p.is(tokPunct, text) {
		return p.unexpected(want)
	}
	p.next()
	return ""
}

func (p *filterParser) unexpected(want string) string {
	got := p.tok.text
	switch p.tok.kind {
	case tokEnd:
		got = "the end"
	case tokBad:
	default:
		got = fmt.Sprintf("%q", got)
	}
	return fmt.Sprintf("expected %s at byte %d, found %s", want, p.tok.at, got)
}

func (p *filterParser) expr() string {
	if err := p.unary(); err != "" {
		return err
	}
	for p.keyword("AND") || p.keyword("OR") {
		p.next()
		if err := p.unary(); err != "" {
			return err
		}
	}
	return ""
}

func (p *filterParser) unary() string {
	switch {
	case p.keyword("NOT") || p.is(tokPunct, "-"):
		p.next()
		return p.unary()
	case p.is(tokPunct, "("):
		p.next()
		if err := p.expr(); err != "" {
			return err
		}
		return p.expect(")", `")"`)
	}
	return p.condition()
}

func (p *filterParser) condition() string {
	if !p.is(tokWord, "") || p.keyword("AND") || p.keyword("OR") {
		return p.unexpected("a condition (attributes:KEY, attributes.KEY = \"value\", hasPrefix(attributes.KEY, \"prefix\"))")
	}
	if !p.keyword("attributes") {
		p.next()
		if err := p.expect("(", `"(" after a function name (conditions start with attributes)`); err != "" {
			return err
		}
		return p.call()
	}
	p.next()
	switch {
	case p.is(tokPunct, ":"):
		p.next()
		return p.key()
	case p.is(tokPunct, "."):
		p.next()
		if err := p.key(); err != "" {
			return err
		}
		if !p.is(tokPunct, "=") && !p.is(tokPunct, "!=") {
			return p.unexpected(`"=" or "!=" after attributes.KEY`)
		}
		p.next()
		return p.str()
	}
	return p.unexpected(`":" or "." after attributes`)
}

// call reads a function's arguments, its name and "(" read.
func (p *filterParser) call() string {
	for {
		if p.keyword("attributes") {
			p.next()
			if err := p.expect(".", `"." after attributes`); err != "" {
				return err
			}
			if err := p.key(); err != "" {
				return err
			}
		} else if err := p.str(); err != "" {
			return err
		}
		if p.is(tokPunct, ")") {
			p.next()
			return ""
		}
		if err := p.expect(",", `"," or ")"`); err != "" {
			return err
		}
	}
}

func (p *filterParser) key() string {
	if p.tok.kind != tokWord && p.tok.kind != tokString {
		return p.unexpected("an attribute key (a word, or a quoted string)")
	}
	p.next()
	return ""
}

func (p *filterParser) str() string {
	if p.tok.kind != tokString {
		return p.unexpected("a quoted string")
	}
	p.next()
	return ""
}
