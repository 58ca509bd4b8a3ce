package service

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the repository, seen from this package.
const repoRoot = "../../.."

// TestDocs keeps the Markdown pages from drifting: the README stays a front door, and
// every relative link of every page (a file, or a heading of one) exists.
func TestDocs(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(readme, []byte("\n")); n > 250 {
		t.Errorf("README.md has %d lines; keep it at most 250 and move details to the pages it links", n)
	}
	var pages []string
	err = filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// node_modules: other projects' pages, installed by npm ci for the client's tests.
		if d.IsDir() && p != repoRoot && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			pages = append(pages, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 7 {
		t.Fatalf("found only %d Markdown pages: %v", len(pages), pages)
	}
	for _, page := range pages {
		name, _ := filepath.Rel(repoRoot, page)
		links, err := markdownLinks(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links {
			target, frag, _ := strings.Cut(l.dest, "#")
			file := page
			if target != "" {
				file = filepath.Join(filepath.Dir(page), filepath.FromSlash(target))
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s:%d: link to %s: no such file", name, l.line, l.dest)
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			anchors, err := markdownAnchors(file)
			if err != nil {
				t.Fatal(err)
			}
			if !anchors[frag] {
				t.Errorf("%s:%d: link to %s: no such heading", name, l.line, l.dest)
			}
		}
	}
}

type mdLink struct {
	line int
	dest string
}

// linkRE matches an inline link or image and captures its destination.
var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// markdownLinks returns the relative links of a page outside code blocks and spans.
func markdownLinks(page string) ([]mdLink, error) {
	var links []mdLink
	err := eachProseLine(page, func(n int, line string) {
		for _, m := range linkRE.FindAllStringSubmatch(stripCodeSpans(line), -1) {
			d := m[1]
			if strings.Contains(d, "://") || strings.HasPrefix(d, "mailto:") {
				continue
			}
			links = append(links, mdLink{n, d})
		}
	})
	return links, err
}

// markdownAnchors returns the anchors GitHub makes of a page's headings: lower case,
// every character but letters, marks, numbers, connectors, dashes and spaces dropped,
// spaces as dashes, a repeated one suffixed -1, -2, ...
func markdownAnchors(page string) (map[string]bool, error) {
	anchors := map[string]bool{}
	seen := map[string]int{}
	err := eachProseLine(page, func(_ int, line string) {
		h := strings.TrimLeft(line, "#")
		if h == line || !strings.HasPrefix(h, " ") {
			return
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(h)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.Pc):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	})
	return anchors, err
}

// eachProseLine calls fn with each line of a page outside fenced and indented code.
func eachProseLine(page string, fn func(n int, line string)) error {
	f, err := os.Open(page)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	fenced := false
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```"):
			fenced = !fenced
		case fenced, strings.HasPrefix(line, "    "):
		default:
			fn(n, line)
		}
	}
	return sc.Err()
}

// codeSpanRE matches an inline code span.
var codeSpanRE = regexp.MustCompile("`[^`]*`")

func stripCodeSpans(line string) string { return codeSpanRE.ReplaceAllString(line, "") }
