package flagenv_test

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/lockhub/lockhub/cmd/internal/flagenv"
)

type settings struct {
	lease   time.Duration
	cluster bool
	workers int
	name    string
}

func parse(t *testing.T, args []string, env map[string]string) (*settings, *flagenv.Parsed, error) {
	t.Helper()
	s := &settings{}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.DurationVar(&s.lease, "lease", 5*time.Minute, "")
	fs.BoolVar(&s.cluster, "redis-cluster", false, "")
	fs.IntVar(&s.workers, "workers", 4, "")
	fs.StringVar(&s.name, "name", "def", "")
	p, err := flagenv.Parse(fs, args, "APP_", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	return s, p, err
}

func TestSources(t *testing.T) {
	s, p, err := parse(t, []string{"--lease", "7m", "--redis-cluster"},
		map[string]string{"APP_LEASE": "9m", "APP_WORKERS": "8", "APP_NAME": ""})
	if err != nil {
		t.Fatal(err)
	}
	if s.lease != 7*time.Minute || !s.cluster || s.workers != 8 || s.name != "def" {
		t.Fatalf("settings %+v: the flag wins, then the variable, an empty variable is unset", s)
	}
	for name, want := range map[string]flagenv.Source{"lease": flagenv.Flag, "redis-cluster": flagenv.Flag, "workers": flagenv.Env, "name": flagenv.Default} {
		if got := p.From(name); got != want {
			t.Errorf("From(%q) = %v, want %v", name, got, want)
		}
	}
	if got := flagenv.EnvName("APP_", "redis-cluster"); got != "APP_REDIS_CLUSTER" {
		t.Errorf("EnvName = %q", got)
	}
}

func TestEveryBadValueIsNamed(t *testing.T) {
	_, _, err := parse(t, []string{"--lease", "soon", "--workers", "many"}, map[string]string{"APP_REDIS_CLUSTER": "maybe"})
	for _, want := range []string{
		`--lease: "soon" is not a Go duration`,
		`--workers: "many" is not a whole number`,
		`APP_REDIS_CLUSTER (--redis-cluster): "maybe" is not true or false`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %s", err, want)
		}
	}
	var fe *flagenv.Error
	if !errors.As(err, &fe) {
		t.Fatalf("error %v is not a *flagenv.Error", err)
	}
}

func TestName(t *testing.T) {
	_, p, err := parse(t, []string{"--lease", "1m"}, map[string]string{"APP_WORKERS": "2"})
	if err != nil {
		t.Fatal(err)
	}
	bad := errors.New("too short")
	for name, want := range map[string]string{
		"lease":   "--lease: too short",
		"workers": "APP_WORKERS (--workers): too short",
		"name":    "--name (APP_NAME): too short",
	} {
		if got := p.Name(name, bad); got.Error() != want || !errors.Is(got, bad) {
			t.Errorf("Name(%q) = %q, want %q wrapping the cause", name, got, want)
		}
	}
}

func TestRefusesArguments(t *testing.T) {
	if _, _, err := parse(t, []string{"serve"}, nil); err == nil || !strings.Contains(err.Error(), "serve") {
		t.Fatalf("Parse of a stray argument = %v", err)
	}
	if _, _, err := parse(t, []string{"-h"}, nil); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("Parse -h = %v, want flag.ErrHelp", err)
	}
}

// TestHelp prints the usage of every flag, with its variable and default, and no
// panic from the flag package's look at a zero value.
func TestHelp(t *testing.T) {
	var out strings.Builder
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(&out)
	fs.Duration("lease", 5*time.Minute, "how long a lock lives")
	fs.Bool("redis-cluster", false, "a cluster")
	_, err := flagenv.Parse(fs, []string{"-h"}, "APP_", func(string) (string, bool) { return "", false })
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v, want flag.ErrHelp", err)
	}
	usage := out.String()
	if strings.Contains(usage, "panic") {
		t.Fatalf("usage:\n%s", usage)
	}
	for _, want := range []string{"how long a lock lives [APP_LEASE] (default 5m0s)", "[APP_REDIS_CLUSTER]"} {
		if !strings.Contains(usage, want) {
			t.Errorf("usage lacks %q:\n%s", want, usage)
		}
	}
}
