package hub

import (
	"errors"
	"testing"
	"time"

	"github.com/lockhub/lockhub/hub/auth"
	"github.com/lockhub/lockhub/protocol"
)

// TestConfigFirstErrorIsFixed: of several bad values, withDefaults refuses the first in
// the documented order (each group in the order of Config's fields), every time. With
// all of a group bad, then all but the first, and so on, each refusal must name the
// next one; each is asked many times, since a map's order would only sometimes differ.
func TestConfigFirstErrorIsFixed(t *testing.T) {
	d, _ := auth.NewDev(auth.DevConfig{})
	th := startMini(t, hubOptions{})
	type bad struct {
		name string // the setting, or the Config field the error names
		set  func(*Config)
	}
	for _, group := range []struct {
		name string
		bad  []bad
	}{
		{"durations of settings", []bad{
			{"release-grace", func(c *Config) { c.ReleaseGrace = -time.Second }},
			{"renew-every", func(c *Config) { c.RenewEvery = -time.Second }},
			{"ping-every", func(c *Config) { c.PingEvery = -time.Second }},
			{"instance-timeout", func(c *Config) { c.InstanceTimeout = -time.Second }},
			{"presence-ttl", func(c *Config) { c.ViewTTL = -time.Second }},
		}},
		{"durations of fields", []bad{
			{"AuthTimeout", func(c *Config) { c.AuthTimeout = -time.Second }},
			{"TokenLeeway", func(c *Config) { c.TokenLeeway = -time.Second }},
			{"WriteTimeout", func(c *Config) { c.WriteTimeout = -time.Second }},
			{"OverRateGrace", func(c *Config) { c.OverRateGrace = -time.Second }},
			{"SweepInterval", func(c *Config) { c.SweepInterval = -time.Second }},
			{"NudgeEvery", func(c *Config) { c.NudgeEvery = -time.Second }},
		}},
		{"limits", []bad{
			{"max-connections", func(c *Config) { c.MaxConnections = -1 }},
			{"max-pending-auth", func(c *Config) { c.MaxPendingAuth = -1 }},
			{"max-pending-auth-per-ip", func(c *Config) { c.MaxPendingAuthPerIP = -1 }},
			{"max-sockets-per-person", func(c *Config) { c.MaxSocketsPerPerson = -1 }},
			{"max-locks-per-socket", func(c *Config) { c.MaxLocksPerSocket = -1 }},
		}},
	} {
		t.Run(group.name, func(t *testing.T) {
			for first := range group.bad {
				c := Config{Store: StoreOf(th.store), Verifier: d}
				for _, b := range group.bad[first:] {
					b.set(&c)
				}
				want := group.bad[first].name
				for range 50 {
					_, err := c.withDefaults()
					if !names(err, want) {
						t.Fatalf("with the %d bad values from %s on, withDefaults = %v; want it to name %s", len(group.bad)-first, want, err, want)
					}
				}
			}
		})
	}
}

// names reports whether err refuses name: a *protocol.SettingError of that setting, or
// the error of a negative Config field of that name.
func names(err error, name string) bool {
	var se *protocol.SettingError
	if errors.As(err, &se) {
		return se.Setting == name
	}
	return err != nil && err.Error() == "hub: Config."+name+" must not be negative"
}
