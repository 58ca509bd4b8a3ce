// Package flagenv parses typed standard flags and seeds those the command line leaves
// out from environment variables named after them (--redis-url is PREFIX_REDIS_URL),
// the way every lockhub command takes its settings. Every value that does not parse is
// reported, each named by the flag or variable it came from, in one error.
//
// Start with Parse; Parsed.Name attributes a later error (a constructor's refusal of a
// value that parsed) to its flag the same way. Nothing here is safe for concurrent use,
// and nothing needs to be: a command parses once, at start.
package flagenv

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Source is where a flag's value came from.
type Source int

// The sources of a value.
const (
	Default Source = iota
	Flag
	Env
)

// EnvName returns the environment variable of flag name: prefix, then the name in
// upper case with dashes as underscores.
func EnvName(prefix, name string) string {
	return prefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Error is a setting that cannot be used. Commands exit with status 2 for it.
type Error struct {
	Flag string // the flag's name, without dashes
	Env  string // its environment variable
	From Source
	Err  error
}

func (e *Error) Error() string {
	switch e.From {
	case Flag:
		return fmt.Sprintf("--%s: %v", e.Flag, e.Err)
	case Env:
		return fmt.Sprintf("%s (--%s): %v", e.Env, e.Flag, e.Err)
	}
	return fmt.Sprintf("--%s (%s): %v", e.Flag, e.Env, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Parsed says where each flag's value came from.
type Parsed struct {
	prefix string
	from   map[string]Source
}

// Name attributes err to flag name, as the flag or variable its value came from.
func (p *Parsed) Name(name string, err error) *Error {
	return &Error{Flag: name, Env: EnvName(p.prefix, name), From: p.from[name], Err: err}
}

// From returns where the value of flag name came from.
func (p *Parsed) From(name string) Source { return p.from[name] }

// Parse parses args into fs, then sets each flag args leave out from its environment
// variable (lookupEnv; an empty variable counts as unset), and leaves the rest at
// their defaults. It adds each flag's variable to its usage. A value that does not
// parse does not stop parsing: the error joins one *Error for each. Arguments that are
// not flags are refused. The error of fs.Parse itself (flag.ErrHelp, an unknown flag)
// is returned as it is.
func Parse(fs *flag.FlagSet, args []string, prefix string, lookupEnv func(string) (string, bool)) (*Parsed, error) {
	p := &Parsed{prefix: prefix, from: map[string]Source{}}
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		f.Value = collecting{Value: f.Value, name: f.Name, p: p, errs: &errs}
		f.Usage += " [" + EnvName(prefix, f.Name) + "]"
	})
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q: every setting is a --flag", fs.Arg(0))
	}
	fs.Visit(func(f *flag.Flag) { p.from[f.Name] = Flag })
	fs.VisitAll(func(f *flag.Flag) {
		if p.from[f.Name] != Default {
			return
		}
		v, ok := lookupEnv(EnvName(prefix, f.Name))
		if !ok || v == "" {
			return
		}
		p.from[f.Name] = Env
		c := f.Value.(collecting)
		if err := c.Value.Set(v); err != nil {
			errs = append(errs, p.Name(f.Name, describe(c.Value, v, err)))
		}
	})
	return p, errors.Join(errs...)
}

// collecting wraps a flag's Value so that a bad value is recorded, and parsing goes on
// to find every bad setting at once.
type collecting struct {
	flag.Value
	name string
	p    *Parsed
	errs *[]error
}

func (c collecting) Set(s string) error {
	if err := c.Value.Set(s); err != nil {
		*c.errs = append(*c.errs, &Error{Flag: c.name, Env: EnvName(c.p.prefix, c.name), From: Flag, Err: describe(c.Value, s, err)})
	}
	return nil
}

// String is the wrapped value's. The flag package also calls it on a zero collecting,
// with no value inside, to tell whether a default is worth printing in the usage.
func (c collecting) String() string {
	if c.Value == nil {
		return ""
	}
	return c.Value.String()
}

// IsBoolFlag lets a boolean setting be given as a bare --flag.
func (c collecting) IsBoolFlag() bool {
	b, ok := c.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// describe says what is wrong with value s of v: the standard typed values answer
// only "parse error".
func describe(v flag.Value, s string, err error) error {
	g, ok := v.(flag.Getter)
	if !ok {
		return err // a Func: its own message
	}
	switch g.Get().(type) {
	case time.Duration:
		return fmt.Errorf("%q is not a Go duration (like 90s, 5m or 1h30m)", s)
	case bool:
		return fmt.Errorf("%q is not true or false", s)
	case int, int64, uint, uint64:
		return fmt.Errorf("%q is not a whole number", s)
	case float64:
		return fmt.Errorf("%q is not a number", s)
	case slog.Level:
		return fmt.Errorf("%q is not debug, info, warn or error", s)
	}
	return fmt.Errorf("%q: %w", s, err)
}
