package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/lockhub/lockhub/cmd/lockhub/service"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first signal, a second one kills at once (the default action).
		<-ctx.Done()
		stop()
	}()

	m := service.NewMain()
	service.SetRedisLogger(m.Logger())
	err := m.Run(ctx)
	if code := service.ExitCode(err); code != 0 {
		fmt.Fprintln(os.Stderr, "lockhub:", err)
		stop()
		os.Exit(code)
	}
}
