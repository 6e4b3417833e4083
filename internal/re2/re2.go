// Package re2 checks regular expressions the way Envoy will: Envoy compiles every regex of a
// route (RegexMatcher, google_re2) with RE2 in Latin-1 mode and refuses the whole resource when
// RE2 does not parse one, or when its program is larger than the runtime value
// re2.max_program_size.error_level (default 100). Go's regexp accepts both, so a regex Go
// accepts can still make Envoy NACK a route configuration and freeze every route of a
// listener.
//
// ProgramSize computes what RE2's RE2::ProgramSize() returns: it follows RE2's own steps on Go's
// parse tree (Go's regexp/syntax is a port of RE2's parser and simplifier): the pattern is read
// as Latin-1, a leading anchored literal is taken off (RE2::RequiredPrefix), leading ^ and
// trailing $ become anchors, the rest is compiled to RE2's instructions (one byte range per
// Latin-1 range, ASCII case folding in the instruction, Alt/Nop/Capture/EmptyWidth as RE2's
// compiler emits them), Nops are elided as Prog::Optimize does, and the program is flattened
// as Prog::Flatten does; its size is the number of flat instructions. TestProgramSizeMatchesEnvoy
// compares it with the size the real Envoy reports, on a table of borderline and generated
// regexes: it must never be below Envoy's.
package re2

import (
	"errors"
	"fmt"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// EnvoyMaxProgramSize is Envoy's default re2.max_program_size.error_level: Envoy refuses a
// regex whose RE2 program is larger.
const EnvoyMaxProgramSize = 100

// MaxProgramSize is the largest ProgramSize kubelb lets through: below EnvoyMaxProgramSize by
// a margin, because ProgramSize follows RE2 closely but not in every detail (RE2's parser
// simplifies some alternations differently): TestProgramSizeMatchesEnvoy shows that every
// regex with ProgramSize up to MaxProgramSize has an RE2 program Envoy accepts.
const MaxProgramSize = 80

// MaxLength bounds a regex's length in bytes.
const MaxLength = 1024

// Check reports why Envoy would refuse pattern as a google_re2 regex (or why kubelb does not
// let it through: longer than MaxLength, ProgramSize above MaxProgramSize), in words for the
// tenant who wrote it; nil when Envoy accepts it.
func Check(pattern string) error {
	if pattern == "" {
		return errors.New("empty regular expression")
	}
	if !utf8.ValidString(pattern) {
		return errors.New("regular expression is not valid UTF-8")
	}
	if len(pattern) > MaxLength {
		return fmt.Errorf("regular expression is %d bytes long; at most %d are allowed", len(pattern), MaxLength)
	}
	n, err := ProgramSize(pattern)
	if err != nil {
		return err
	}
	if n > MaxProgramSize {
		size := strconv.Itoa(n)
		if n > MaxCounted {
			size = "over " + strconv.Itoa(MaxCounted)
		}
		return fmt.Errorf("regular expression is too complex for Envoy: its RE2 program size is %s, at most %d is allowed (use fewer alternatives, character classes and counted repetitions such as {n,m})", size, MaxProgramSize)
	}
	return nil
}

// ProgramSize returns the size of the RE2 program Envoy compiles pattern to (MaxCounted+1 for
// any size above MaxCounted), or why RE2 (as Envoy runs it) does not accept the pattern.
func ProgramSize(pattern string) (int, error) {
	re, err := parse(pattern)
	if err != nil {
		return 0, err
	}
	return min(programSize(re)+2*alternatives(pattern), MaxCounted+1), nil
}

// alternatives counts the |s of pattern, each as often as a counted repetition around it
// copies it ((a|b){3} counts 3). RE2's parser factors alternatives its own way: where Go's
// parser merges repeated branches (a|b|b is [ab]), RE2 can leave a branch and a Nop behind, up to
// two more instructions per |. ProgramSize adds two for each, so it stays at or above RE2's.
func alternatives(pattern string) int {
	n, _ := altScan(pattern, 0)
	return n
}

// altScan counts from i to the end of the group that i is in; it returns the count and the
// index of the group's ')' (or len(p)).
func altScan(p string, i int) (int, int) {
	n := 0
	for i < len(p) {
		switch p[i] {
		case '\\':
			i = skipEscape(p, i)
			continue
		case '[':
			i = skipClass(p, i)
			continue
		case '|':
			n++
		case ')':
			return n, i
		case '(':
			inner, end := altScan(p, i+1)
			i = end + 1
			times := 1
			if i < len(p) && p[i] == '{' {
				if close := strings.IndexByte(p[i:], '}'); close > 0 {
					lo, hi, _ := strings.Cut(p[i+1:i+close], ",")
					for _, v := range []string{lo, hi} {
						if k, err := strconv.Atoi(v); err == nil && k > times {
							times = k
						}
					}
					if hi == "" && strings.Contains(p[i+1:i+close], ",") {
						times++
					}
				}
			}
			n += inner * times
			continue
		}
		i++
	}
	return n, i
}

// skipEscape returns the index after the escape at p[i] ('\\'): \Q...\E, \x{...}, \p{...}, \P{...}
// or one escaped character.
func skipEscape(p string, i int) int {
	if i+1 >= len(p) {
		return len(p)
	}
	switch p[i+1] {
	case 'Q':
		if end := strings.Index(p[i+2:], `\E`); end >= 0 {
			return i + 2 + end + 2
		}
		return len(p)
	case 'x', 'p', 'P':
		if i+2 < len(p) && p[i+2] == '{' {
			if end := strings.IndexByte(p[i:], '}'); end >= 0 {
				return i + end + 1
			}
		}
	}
	return i + 2
}

// skipClass returns the index after the character class that starts at p[i] ('[').
func skipClass(p string, i int) int {
	j := i + 1
	if j < len(p) && p[j] == '^' {
		j++
	}
	if j < len(p) && p[j] == ']' {
		j++ // a leading ] is a character
	}
	for j < len(p) {
		switch {
		case p[j] == '\\':
			j = skipEscape(p, j)
			continue
		case strings.HasPrefix(p[j:], "[:"):
			if end := strings.Index(p[j+2:], ":]"); end >= 0 {
				j += 2 + end + 2
				continue
			}
		case p[j] == ']':
			return j + 1
		}
		j++
	}
	return len(p)
}

// parse reads pattern as RE2 in Envoy does: Latin-1 (every byte is one character), Perl
// syntax. Constructs Go accepts and RE2 does not are refused.
func parse(pattern string) (*syntax.Regexp, error) {
	if strings.Contains(pattern, `\C`) {
		// RE2's "any byte": Go refuses it too, but with a message about escapes.
		return nil, errors.New(`\C (any byte) is not allowed`)
	}
	if err := latin1Only(pattern); err != nil {
		return nil, err
	}
	// RE2 converts a Latin-1 pattern to UTF-8 before it parses it; so does this.
	var b strings.Builder
	for i := 0; i < len(pattern); i++ {
		b.WriteRune(rune(pattern[i]))
	}
	re, err := syntax.Parse(b.String(), syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("not a regular expression (RE2 syntax): %s", strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	return re, nil
}

// latin1Only refuses escapes of characters above \xFF (\x{100}, \777): RE2 in Latin-1 mode
// refuses them, Go accepts them. (Classes that reach above \xFF, such as \pL or [^a], are cut
// at \xFF as RE2 cuts them.)
func latin1Only(pattern string) error {
	for i := 0; i < len(pattern); i++ {
		if pattern[i] != '\\' || i+1 == len(pattern) {
			continue
		}
		i++
		switch c := pattern[i]; {
		case c == 'Q':
			end := strings.Index(pattern[i:], `\E`)
			if end < 0 {
				return nil
			}
			i += end + 1
		case c == 'x' && i+1 < len(pattern) && pattern[i+1] == '{':
			end := strings.IndexByte(pattern[i:], '}')
			if end < 0 {
				continue // Go refuses it
			}
			if v, err := strconv.ParseUint(pattern[i+2:i+end], 16, 32); err == nil && v > 0xFF {
				return fmt.Errorf("escape \\x{%s} is above \\xFF: Envoy matches bytes (Latin-1), so write characters up to \\xFF only", pattern[i+2:i+end])
			}
			i += end
		case '0' <= c && c <= '7':
			j := i
			for j < len(pattern) && j < i+3 && '0' <= pattern[j] && pattern[j] <= '7' {
				j++
			}
			if v, _ := strconv.ParseUint(pattern[i:j], 8, 32); v > 0xFF {
				return fmt.Errorf("escape \\%s is above \\xFF: Envoy matches bytes (Latin-1), so write characters up to \\xFF only", pattern[i:j])
			}
			i = j - 1
		}
	}
	return nil
}

// RE2's instruction opcodes.
const (
	opFail = iota
	opAlt
	opAltMatch
	opByteRange
	opCapture
	opEmptyWidth
	opMatch
	opNop
)

type inst struct {
	op        int
	out, out1 int
	lo, hi    rune
	fold      bool
}

// frag is a compiled fragment: its first instruction and the holes to patch with the next
// one (instruction<<1 | 1 for out1). begin 0 is RE2's NoMatch.
type frag struct {
	begin    int
	end      []int
	nullable bool
}

// MaxCounted bounds the work of ProgramSize: a program is compiled up to this many
// instructions only, and a larger one has ProgramSize MaxCounted+1. (Counted repetitions let a
// 1024-byte pattern stand for a million instructions.)
const MaxCounted = 4096

type compiler struct {
	inst     []inst
	overflow bool
}

func (c *compiler) alloc(op int) int {
	if len(c.inst) >= MaxCounted {
		c.overflow = true
	}
	c.inst = append(c.inst, inst{op: op})
	return len(c.inst) - 1
}

func (c *compiler) patch(holes []int, to int) {
	for _, h := range holes {
		if h&1 == 1 {
			c.inst[h>>1].out1 = to
		} else {
			c.inst[h>>1].out = to
		}
	}
}

func noMatch() frag             { return frag{} }
func isNoMatch(f frag) bool     { return f.begin == 0 }
func (c *compiler) nop() frag   { id := c.alloc(opNop); return frag{id, []int{id << 1}, true} }
func (c *compiler) match() frag { id := c.alloc(opMatch); return frag{begin: id} }

func (c *compiler) emptyWidth() frag {
	id := c.alloc(opEmptyWidth)
	return frag{id, []int{id << 1}, true}
}

func (c *compiler) byteRange(lo, hi rune, fold bool) frag {
	id := c.alloc(opByteRange)
	c.inst[id].lo, c.inst[id].hi, c.inst[id].fold = lo, hi, fold
	return frag{id, []int{id << 1}, false}
}

func (c *compiler) cat(a, b frag) frag {
	if isNoMatch(a) || isNoMatch(b) {
		return noMatch()
	}
	if in := c.inst[a.begin]; in.op == opNop && len(a.end) == 1 && a.end[0] == a.begin<<1 && in.out == 0 {
		c.patch(a.end, b.begin)
		return b
	}
	c.patch(a.end, b.begin)
	return frag{a.begin, b.end, a.nullable && b.nullable}
}

func (c *compiler) alt(a, b frag) frag {
	if isNoMatch(a) {
		return b
	}
	if isNoMatch(b) {
		return a
	}
	id := c.alloc(opAlt)
	c.inst[id].out, c.inst[id].out1 = a.begin, b.begin
	return frag{id, append(slices.Clip(a.end), b.end...), a.nullable || b.nullable}
}

// loop is RE2's Alt of a repetition: greedy tries a first.
func (c *compiler) loop(a frag, nongreedy bool) (int, []int) {
	id := c.alloc(opAlt)
	if nongreedy {
		c.inst[id].out1 = a.begin
		return id, []int{id << 1}
	}
	c.inst[id].out = a.begin
	return id, []int{id<<1 | 1}
}

func (c *compiler) plus(a frag, nongreedy bool) frag {
	id, pl := c.loop(a, nongreedy)
	c.patch(a.end, id)
	return frag{a.begin, pl, a.nullable}
}

func (c *compiler) star(a frag, nongreedy bool) frag {
	if a.nullable {
		return c.quest(c.plus(a, nongreedy), nongreedy)
	}
	id, pl := c.loop(a, nongreedy)
	c.patch(a.end, id)
	return frag{id, pl, true}
}

func (c *compiler) quest(a frag, nongreedy bool) frag {
	if isNoMatch(a) {
		return c.nop()
	}
	id, pl := c.loop(a, nongreedy)
	return frag{id, append(pl, a.end...), true}
}

func (c *compiler) capture(a frag) frag {
	if isNoMatch(a) {
		return noMatch()
	}
	id := c.alloc(opCapture)
	c.alloc(opCapture)
	c.inst[id].out = a.begin
	c.patch(a.end, id+1)
	return frag{id, []int{(id + 1) << 1}, a.nullable}
}

// class compiles Latin-1 ranges (lo, hi pairs, sorted) as RE2 does: one byte range each, in
// an Alt chain; when the class treats A-Z as a-z, ranges within A-Z are left out and the others
// fold ASCII case.
func (c *compiler) class(ranges []rune) frag {
	ranges = clampLatin1(ranges)
	foldASCII := foldsASCII(ranges)
	begin := 0
	var end []int
	for i := 0; i+1 < len(ranges); i += 2 {
		lo, hi := ranges[i], ranges[i+1]
		if foldASCII && 'A' <= lo && hi <= 'Z' {
			continue
		}
		fold := foldASCII
		if lo <= 'A' && 'z' <= hi || hi < 'A' || 'z' < lo || 'Z' < lo && hi < 'a' {
			fold = false
		}
		id := c.byteRange(lo, hi, fold).begin
		end = append(end, id<<1)
		if begin == 0 {
			begin = id
			continue
		}
		alt := c.alloc(opAlt)
		c.inst[alt].out, c.inst[alt].out1 = begin, id
		begin = alt
	}
	if begin == 0 {
		return noMatch()
	}
	return frag{begin, end, false}
}

func clampLatin1(ranges []rune) []rune {
	var out []rune
	for i := 0; i+1 < len(ranges); i += 2 {
		lo, hi := ranges[i], min(ranges[i+1], 0xFF)
		if lo <= hi {
			out = append(out, lo, hi)
		}
	}
	return out
}

func classContains(ranges []rune, r rune) bool {
	for i := 0; i+1 < len(ranges); i += 2 {
		if ranges[i] <= r && r <= ranges[i+1] {
			return true
		}
	}
	return false
}

// foldsASCII: the class has each of A-Z exactly when it has the matching a-z.
func foldsASCII(ranges []rune) bool {
	for r := 'A'; r <= 'Z'; r++ {
		if classContains(ranges, r) != classContains(ranges, r+'a'-'A') {
			return false
		}
	}
	return true
}

// literal compiles one character; with case folding, a character whose Latin-1 fold orbit is
// more than an ASCII letter pair becomes a class, as RE2's parser makes it.
func (c *compiler) literal(r rune, fold bool) frag {
	if !fold {
		return c.byteRange(r, r, false)
	}
	orbit := []rune{r}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f <= 0xFF {
			orbit = append(orbit, f)
		}
	}
	slices.Sort(orbit)
	switch {
	case len(orbit) == 1:
		return c.byteRange(r, r, false)
	case len(orbit) == 2 && 'A' <= orbit[0] && orbit[0] <= 'Z' && orbit[1] == orbit[0]+'a'-'A':
		return c.byteRange(orbit[1], orbit[1], true)
	}
	var ranges []rune
	for _, o := range orbit {
		if n := len(ranges); n > 0 && ranges[n-1]+1 == o {
			ranges[n-1] = o
		} else {
			ranges = append(ranges, o, o)
		}
	}
	return c.class(ranges)
}

func (c *compiler) compile(re *syntax.Regexp) frag {
	if c.overflow {
		return noMatch()
	}
	nongreedy := re.Flags&syntax.NonGreedy != 0
	switch re.Op {
	case syntax.OpNoMatch:
		return noMatch()
	case syntax.OpEmptyMatch:
		return c.nop()
	case syntax.OpLiteral:
		if len(re.Rune) == 0 {
			return c.nop()
		}
		var f frag
		for i, r := range re.Rune {
			f1 := c.literal(r, re.Flags&syntax.FoldCase != 0)
			if i == 0 {
				f = f1
			} else {
				f = c.cat(f, f1)
			}
		}
		return f
	case syntax.OpCharClass:
		return c.class(re.Rune)
	case syntax.OpAnyCharNotNL:
		return c.class([]rune{0, '\n' - 1, '\n' + 1, unicode.MaxRune})
	case syntax.OpAnyChar:
		return c.class([]rune{0, unicode.MaxRune})
	case syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return c.emptyWidth()
	case syntax.OpCapture:
		return c.capture(c.compile(re.Sub[0]))
	case syntax.OpStar:
		return c.star(c.compile(re.Sub[0]), nongreedy)
	case syntax.OpPlus:
		return c.plus(c.compile(re.Sub[0]), nongreedy)
	case syntax.OpQuest:
		return c.quest(c.compile(re.Sub[0]), nongreedy)
	case syntax.OpConcat:
		if len(re.Sub) == 0 {
			return c.nop()
		}
		frags := make([]frag, len(re.Sub))
		for i, s := range re.Sub {
			frags[i] = c.compile(s)
		}
		f := frags[0]
		for _, g := range frags[1:] {
			f = c.cat(f, g)
		}
		return f
	case syntax.OpAlternate:
		frags := make([]frag, len(re.Sub))
		for i, s := range re.Sub {
			frags[i] = c.compile(s)
		}
		f := frags[len(frags)-1]
		for i := len(frags) - 2; i >= 0; i-- {
			f = c.alt(frags[i], f)
		}
		return f
	}
	// OpRepeat is gone after Simplify; anything else is not something Go's parser makes.
	return c.nop()
}

// requiredPrefix is RE2's Regexp::RequiredPrefix: ^literal... is compiled without ^literal
// (RE2 matches the literal prefix itself, and compiles the rest unanchored).
func requiredPrefix(re *syntax.Regexp) *syntax.Regexp {
	if re.Op != syntax.OpConcat {
		return re
	}
	i := 0
	for i < len(re.Sub) && re.Sub[i].Op == syntax.OpBeginText {
		i++
	}
	if i == 0 || i >= len(re.Sub) || re.Sub[i].Op != syntax.OpLiteral {
		return re
	}
	i++
	switch rest := re.Sub[i:]; len(rest) {
	case 0:
		return &syntax.Regexp{Op: syntax.OpEmptyMatch, Flags: re.Flags}
	case 1:
		return rest[0]
	default:
		return &syntax.Regexp{Op: syntax.OpConcat, Flags: re.Flags, Sub: slices.Clone(rest)}
	}
}

// anchor is RE2's IsAnchorStart (first) or IsAnchorEnd (!first): a ^ (or $) at the start (or
// end) of the regex, looking through concatenations and captures to depth 4, becomes an empty
// literal and an anchor of the program.
func anchor(re *syntax.Regexp, first bool, depth int) (*syntax.Regexp, bool) {
	if re == nil || depth >= 4 {
		return re, false
	}
	want := syntax.OpBeginText
	if !first {
		want = syntax.OpEndText
	}
	switch re.Op {
	case syntax.OpConcat:
		if len(re.Sub) == 0 {
			return re, false
		}
		i := 0
		if !first {
			i = len(re.Sub) - 1
		}
		if sub, ok := anchor(re.Sub[i], first, depth+1); ok {
			cp := *re
			cp.Sub = slices.Clone(re.Sub)
			cp.Sub[i] = sub
			return &cp, true
		}
	case syntax.OpCapture:
		if sub, ok := anchor(re.Sub[0], first, depth+1); ok {
			cp := *re
			cp.Sub = []*syntax.Regexp{sub}
			return &cp, true
		}
	case want:
		return &syntax.Regexp{Op: syntax.OpLiteral, Flags: re.Flags}, true
	}
	return re, false
}

// programSize compiles as RE2's Compiler::Compile and returns the size of the flattened Prog.
func programSize(re *syntax.Regexp) int {
	sre := requiredPrefix(re).Simplify()
	sre, anchorStart := anchor(sre, true, 0)
	sre, _ = anchor(sre, false, 0)
	c := &compiler{}
	c.alloc(opFail)
	all := c.compile(sre)
	all = c.cat(all, c.match())
	start := all.begin
	if !anchorStart {
		all = c.cat(c.star(c.byteRange(0x00, 0xFF, false), true), all)
	}
	startUnanchored := all.begin
	if c.overflow {
		return MaxCounted + 1
	}
	if start == 0 && startUnanchored == 0 {
		return 1
	}
	c.optimize(start)
	return c.flatSize(start, startUnanchored)
}

// optimize is Prog::Optimize: outs skip Nops (from start on), and a greedy or lazy .* (over
// every byte) before Match becomes an AltMatch.
func (c *compiler) optimize(start int) {
	skip := func(j int) int {
		for j != 0 && c.inst[j].op == opNop {
			j = c.inst[j].out
		}
		return j
	}
	seen := map[int]bool{}
	queue := []int{start}
	add := func(id int) {
		if id != 0 && !seen[id] {
			seen[id] = true
			queue = append(queue, id)
		}
	}
	seen[start] = true
	for k := 0; k < len(queue); k++ {
		ip := &c.inst[queue[k]]
		ip.out = skip(ip.out)
		add(ip.out)
		if ip.op == opAlt {
			ip.out1 = skip(ip.out1)
			add(ip.out1)
		}
	}
	for _, id := range queue {
		ip := &c.inst[id]
		if ip.op != opAlt {
			continue
		}
		j, k := &c.inst[ip.out], &c.inst[ip.out1]
		if j.op == opByteRange && j.out == id && j.lo == 0x00 && j.hi == 0xFF && !j.fold && isMatch(c, ip.out1) ||
			k.op == opByteRange && k.out == id && k.lo == 0x00 && k.hi == 0xFF && !k.fold && isMatch(c, ip.out) {
			ip.op = opAltMatch
		}
	}
}

// isMatch: id leads to Match without consuming input (Prog::Optimize's IsMatch).
func isMatch(c *compiler, id int) bool {
	for {
		ip := c.inst[id]
		switch ip.op {
		case opCapture, opNop:
			id = ip.out
		case opMatch:
			return true
		default:
			return false
		}
	}
}

// flatSize is the number of instructions Prog::Flatten makes: a list per root (Fail, the two
// starts, the target of every instruction that consumes or records, and every instruction an
// Alt reaches from outside its root's list), each holding the non-Alt instructions its root
// reaches through Alts and Nops, and a Nop for each other root it reaches.
func (c *compiler) flatSize(start, startUnanchored int) int {
	var roots []int
	isRoot := map[int]bool{}
	addRoot := func(id int) {
		if !isRoot[id] {
			isRoot[id] = true
			roots = append(roots, id)
		}
	}
	addRoot(0)
	addRoot(startUnanchored)
	addRoot(start)
	preds := map[int][]int{}
	reachable := map[int]bool{}
	stk := []int{startUnanchored}
	for len(stk) > 0 {
		id := stk[len(stk)-1]
		stk = stk[:len(stk)-1]
		for !reachable[id] {
			reachable[id] = true
			ip := c.inst[id]
			switch ip.op {
			case opAlt, opAltMatch:
				preds[ip.out] = append(preds[ip.out], id)
				preds[ip.out1] = append(preds[ip.out1], id)
				stk = append(stk, ip.out1)
				id = ip.out
				continue
			case opByteRange, opCapture, opEmptyWidth:
				addRoot(ip.out)
				id = ip.out
				continue
			case opNop:
				id = ip.out
				continue
			}
			break
		}
	}
	closure := func(root int) (set map[int]bool, order []int) {
		set = map[int]bool{}
		stk := []int{root}
		for len(stk) > 0 {
			id := stk[len(stk)-1]
			stk = stk[:len(stk)-1]
			for !set[id] {
				set[id] = true
				order = append(order, id)
				if id != root && isRoot[id] {
					break
				}
				ip := c.inst[id]
				if ip.op == opAlt || ip.op == opAltMatch {
					stk = append(stk, ip.out1)
					id = ip.out
					continue
				}
				if ip.op == opNop {
					id = ip.out
					continue
				}
				break
			}
		}
		return set, order
	}
	sorted := slices.Clone(roots)
	slices.Sort(sorted)
	for i := len(sorted) - 1; i > 0; i-- {
		root := sorted[i]
		if root == startUnanchored || root == start {
			continue
		}
		set, order := closure(root)
		for _, id := range order {
			for _, p := range preds[id] {
				if !set[p] {
					addRoot(id)
				}
			}
		}
	}
	n := 0
	for _, root := range roots {
		_, order := closure(root)
		for _, id := range order {
			switch {
			case id != root && isRoot[id]:
				n++ // a Nop to the other list
			case c.inst[id].op == opAltMatch:
				n++
			case c.inst[id].op == opAlt, c.inst[id].op == opNop:
			default:
				n++
			}
		}
	}
	return n
}
