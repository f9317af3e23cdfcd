// Package e2e is the crash matrix of rightsize-go: proof, on the real
// engine with real processes and real signals, that nothing a test started
// is left behind however the test dies, and that nothing of a live process
// is ever touched.
//
// Every row starts real sandboxes from a real owner process (this test
// binary re-executed as TestOwner with a plan in RZ_E2E_PLAN, or `go test`
// on the fixture package testdata/timeoutfixture), ends it the way the row
// says, and polls, with a deadline, until every container and network
// carrying the run's label and every file of the run in the ledger is
// gone. A bystander owner with a sandbox and a network of its own lives in
// the same cache dir through each row and must come out untouched. Each
// row uses a cache dir of its own (RIGHTSIZE_CACHE_DIR in a temp dir) and
// TESTCONTAINERS_RYUK_DISABLED=true.
//
//	row  test                            how the owner ends
//	 1   TestRow01SIGKILL                SIGKILL, 1, 5 and 20 containers, 2 networks
//	 2   TestRow02GoTestTimeout          `go test -timeout 3s` panics
//	 3   TestRow03TestDies               panic, panic in a goroutine, os.Exit(1), log.Fatal
//	 4   TestRow04CtrlC                  SIGINT to the process group (binary, and `go test`)
//	 5   TestRow05OOMKill                the kernel's OOM killer, in a memory cgroup (containers, a network, a process tree)
//	 6   TestRow06SessionKilled          owner and watchdog SIGKILLed: the next first use sweeps
//	 7   TestRow07EngineUnreachable      sweeps with the engine gone keep everything
//	 8   TestRow08LiveOwnersUntouched    two live owners, a third process sweeping N rounds
//	 9   TestRow09PIDReuse               records of a live pid with another start time
//	10   TestRow10PidNamespace           an owner in another pid namespace
//	11   TestRow11SecondEngine           a second dockerd: never reaped through the first
//	12   TestRow12RandomKills            SIGKILL at a random moment of a start/stop loop
//	13   TestRow13HostileLedger          hostile ledger files through sweep and watchdog
//	14   TestRow14InAContainer           the test binary in a container, the socket mounted, no CLI
//	15   TestRow15GuardAll               GuardAll: containers made by modules, the client, docker run; what the test removed is forgotten
//	16   TestRow16Fates                  each reaper writes the run's fate; the next process tells it
//	17   TestRow17Processes              local processes: SIGKILL, go test -timeout, one escaped, the next sweep
//	18   TestRow18LostMarks              local processes without their mark (a title over it, env -i): SIGKILL under either watchdog, one escaped, the next sweep
//	19   TestRow19MachineInNetns         the machine (owner and watchdog) in a network namespace of its own, kept by the engine-side keeper on a second engine over TCP (a dockerd; in the Podman gate a Podman service):
//	       killed                        SIGKILL of every process in it
//	       frozen                        SIGSTOP of every process in it: gone after the lease timeout
//	       traffic dropped               iptables DROP in it, no FIN or RST sent, its processes alive: gone after the lease timeout
//	user TestUserModuleDies              a test binary built as a user builds it (internal/usermod): SIGKILL, its -test.timeout alarm, a pass
//	                                     (the same on Kubernetes: backend/kubernetes TestUserModuleOnNode, in the kube gate)
//	lease TestUserModuleLeaseDeleted     on Kubernetes (backend/kubernetes, in the kube gate), a user's test binary holds a pod while its
//	                                     run's Lease is deleted: the run recovers (a new Lease owns its next pod, which the collector
//	                                     leaves), the loss is said once, the stop of the lost pod fails the test, its end leaves nothing
//	build TestGuardAllBuildAndVolume     GuardAll: images built and named volumes made through the proxy, SIGKILL: gone with the run,
//	                                     an image there before the test and one another process's container uses kept
//	      TestGuardAllBuildAndVolumeTimeout  the same, ended by its -test.timeout alarm
//	pkill TestRowPkillTestBinaries      SIGKILL, with `pkill -f '\.test$'` run throughout: no watchdog looks like a test binary
//
// The engine-side keeper's rows on the local engine (RIGHTSIZE_WATCHDOG=
// engine; the "machine" is the owner and its watchdog):
//
//	TestKeeperMachineKilled         owner and watchdog SIGKILLed: the keeper reaps at once
//	TestKeeperMachineFrozen         owner and watchdog SIGSTOPped: the keeper reaps after the lease timeout
//	TestKeeperOwnerPaused           the owner alone stopped for ten lease timeouts: nothing goes
//	TestKeeperSweepFromAnyMachine   machine dead, keeper killed: a sweep from elsewhere reaps the kept run, not a run without a keeper
//	TestKeeperGuardAll              the same for a GuardAll binary's containers made by plain clients, which carry the kept mark
//	TestKeeperStrangerAttach        a stranger's attach (input at its end, docker attach, Ctrl-C) to a live run's keeper: nothing goes
//	TestKeeperRestarted             the keeper killed while its owner lives: started again; no sweep from elsewhere takes the run
//	TestKeeperUserModule            a user's test binary (internal/usermod): its keeper; a stranger's attach; SIGKILL: the keeper reaps
//
// `go test ./e2e/` runs rows 8 and 12 with reduced counts (10 rounds; 3
// kills at the first ledger write and 10 at random); `-args -full` (make
// e2e) or RIGHTSIZE_E2E_FULL=1 runs 100 rounds and 3 + 200 kills. Rows
// skip, saying why, where the machine cannot give what they need (a
// writable memory cgroup, unshare, dockerd, root for network namespaces
// and veths).
//
// The benchmark harness of the same promise is ./bench (`go run
// ./e2e/bench -h`).
package e2e
