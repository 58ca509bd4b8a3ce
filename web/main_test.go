package web_test

import (
	"testing"

	"github.com/lockhub/lockhub/locks/redistest"
)

func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }
