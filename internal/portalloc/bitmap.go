package portalloc

import "math/bits"

// bitmap tracks used slots 0..n-1 in two levels: words holds one bit per slot (set = used)
// and full one bit per word (set = every slot of that word used). Finding the lowest free
// slot scans full (n/4096 words, at most 16 for the whole 16-bit port space) and then one
// word, so its cost depends on the size of the range, never on how many slots are used.
type bitmap struct {
	words []uint64
	full  []uint64
	used  int
	n     int
}

func newBitmap(n int) *bitmap {
	nw := (n + 63) / 64
	b := &bitmap{words: make([]uint64, nw), full: make([]uint64, (nw+63)/64), n: n}
	// Slots past n in the last word, and words past nw in the last summary word, are
	// marked used so the search never returns them.
	if r := n % 64; r != 0 {
		b.words[nw-1] = ^uint64(0) << r
	}
	if r := nw % 64; r != 0 {
		b.full[len(b.full)-1] = ^uint64(0) << r
	}
	return b
}

func (b *bitmap) isSet(i int) bool { return b.words[i/64]&(1<<(i%64)) != 0 }

// set marks slot i used; it reports false when it already was.
func (b *bitmap) set(i int) bool {
	w := i / 64
	if b.words[w]&(1<<(i%64)) != 0 {
		return false
	}
	b.words[w] |= 1 << (i % 64)
	if b.words[w] == ^uint64(0) {
		b.full[w/64] |= 1 << (w % 64)
	}
	b.used++
	return true
}

// clear marks slot i free; it reports false when it already was.
func (b *bitmap) clear(i int) bool {
	w := i / 64
	if b.words[w]&(1<<(i%64)) == 0 {
		return false
	}
	b.words[w] &^= 1 << (i % 64)
	b.full[w/64] &^= 1 << (w % 64)
	b.used--
	return true
}

// lowestFree returns the lowest free slot, or -1 when every slot is used.
func (b *bitmap) lowestFree() int {
	for s, f := range b.full {
		if f == ^uint64(0) {
			continue
		}
		w := s*64 + bits.TrailingZeros64(^f)
		return w*64 + bits.TrailingZeros64(^b.words[w])
	}
	return -1
}

func (b *bitmap) free() int { return b.n - b.used }
