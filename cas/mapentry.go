package cas

// WithoutEntry returns the encoding of the map that data encodes, less its
// entry for key, and whether data is one map holding such an entry. For
// canonical DAG-CBOR (what [Unmarshal] accepts) the result is the
// canonical encoding of the smaller map: the other entries keep their
// bytes and order, and the head takes its shortest form for the new
// count. A receipt's signing bytes are its block less "signature", with no
// need to encode the receipt again.
func WithoutEntry(data []byte, key string) ([]byte, bool) {
	major, n, count, ok := readHead(data)
	if !ok || major != majorMap {
		return nil, false
	}
	s := linkScanner{data: data, pos: n, skip: true}
	from, to := -1, -1
	for range count {
		at := s.pos
		k, ok := s.key()
		if !ok || !s.item(1) {
			return nil, false
		}
		if string(k) == key {
			if from >= 0 {
				return nil, false
			}
			from, to = at, s.pos
		}
	}
	if from < 0 || s.pos != len(data) {
		return nil, false
	}
	out := appendHead(make([]byte, 0, len(data)), majorMap, count-1)
	out = append(out, data[n:from]...)
	return append(out, data[to:]...), true
}

// WithEntry returns the encoding of the map that data encodes with the
// entry key: value added, value being one encoded item, and whether data
// is one map without such an entry. The entry goes where canonical
// DAG-CBOR orders it (shorter keys first, then bytewise), so for canonical
// data and value the result is canonical.
func WithEntry(data []byte, key string, value []byte) ([]byte, bool) {
	major, n, count, ok := readHead(data)
	if !ok || major != majorMap {
		return nil, false
	}
	s := linkScanner{data: data, pos: n, skip: true}
	at := -1
	for range count {
		start := s.pos
		k, ok := s.key()
		if !ok || !s.item(1) || string(k) == key {
			return nil, false
		}
		if at < 0 && keyBefore(key, k) {
			at = start
		}
	}
	if s.pos != len(data) {
		return nil, false
	}
	if at < 0 {
		at = len(data)
	}
	out := appendHead(make([]byte, 0, len(data)+len(key)+len(value)+10), majorMap, count+1)
	out = append(out, data[n:at]...)
	out = appendHead(out, majorText, uint64(len(key)))
	out = append(out, key...)
	out = append(out, value...)
	return append(out, data[at:]...), true
}

// keyBefore reports whether map key a sorts before b in canonical
// DAG-CBOR: shorter first, then bytewise.
func keyBefore(a string, b []byte) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < string(b)
}

// key reads a map key, which DAG-CBOR requires to be a text string.
func (s *linkScanner) key() ([]byte, bool) {
	major, n, size, ok := readHead(s.data[s.pos:])
	if !ok || major != majorText || size > uint64(len(s.data)-s.pos-n) {
		return nil, false
	}
	start := s.pos + n
	s.pos = start + int(size)
	return s.data[start:s.pos], true
}

// BytesEntry returns the content of the byte string that data, one map,
// holds under key, and whether it holds one there. Only the map's top
// level up to that entry is read, and nothing is checked beyond it: a
// caller that needs data valid decodes it.
func BytesEntry(data []byte, key string) ([]byte, bool) {
	return stringEntry(data, key, majorBytes)
}

// TextEntry is [BytesEntry] for a text string. Its UTF-8 is not checked.
func TextEntry(data []byte, key string) (string, bool) {
	b, ok := stringEntry(data, key, majorText)
	return string(b), ok
}

func stringEntry(data []byte, key string, want byte) ([]byte, bool) {
	major, n, count, ok := readHead(data)
	if !ok || major != majorMap {
		return nil, false
	}
	s := linkScanner{data: data, pos: n, skip: true}
	for range count {
		k, ok := s.key()
		if !ok {
			return nil, false
		}
		if string(k) != key {
			if !s.item(1) {
				return nil, false
			}
			continue
		}
		major, n, size, ok := readHead(data[s.pos:])
		if !ok || major != want || size > uint64(len(data)-s.pos-n) {
			return nil, false
		}
		start := s.pos + n
		return data[start : start+int(size)], true
	}
	return nil, false
}
