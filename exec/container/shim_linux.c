// The PID-1 shim in C, run before the Go runtime starts.
//
// `foreman shim -- CMD...` is what every container runs as its init (see
// exec.ShimMain for the contract). The Go version costs a second start of
// the Go runtime and of every package init of the 20 MB binary on each
// container start (after libcontainer's own `init` re-exec); this
// constructor does the same job before any of that happens, so the shim is
// one fork and two execs of C. Like libcontainer's nsexec constructor, it
// runs in every process of the binary and returns at once unless argv[1]
// is "shim". glibc passes (argc, argv, envp) to ELF constructors, static or
// dynamic; without them (another libc) it returns and exec.ShimMain runs.
//
// Behaviour, identical to exec.ShimMain:
//   - every signal is blocked before the child exists, so none is lost or
//     dropped (the kernel never discards a *blocked* signal, even for a pid
//     namespace's init); the child gets the original mask back;
//   - the child runs in its own process group; SIGTERM, SIGINT, SIGHUP,
//     SIGQUIT, SIGUSR1 and SIGUSR2 are forwarded to that group, others are
//     discarded;
//   - the shim is a child subreaper and reaps everything;
//   - it exits with the child's status, 128+n if the child was killed by
//     signal n; 127 if the command does not exist, 126 if it cannot run.

#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static int forwarded(int sig)
{
	switch (sig) {
	case SIGTERM:
	case SIGINT:
	case SIGHUP:
	case SIGQUIT:
	case SIGUSR1:
	case SIGUSR2:
		return 1;
	}
	return 0;
}

static void foreman_shim(int argc, char **argv)
{
	sigset_t all, old;
	pid_t child;
	char **args = argv + 2;

	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	if (argc > 2 && strcmp(argv[2], "--") == 0)
		args++;
	if (*args == NULL) {
		fputs("usage: foreman shim -- CMD [ARGS...]\n", stderr);
		_exit(127);
	}
	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);

	child = fork();
	if (child < 0) {
		fprintf(stderr, "foreman shim: start %s: %s\n", args[0], strerror(errno));
		_exit(126);
	}
	if (child == 0) {
		setpgid(0, 0);
		sigprocmask(SIG_SETMASK, &old, NULL);
		execvp(args[0], args);
		fprintf(stderr, "foreman shim: %s: %s\n", args[0], strerror(errno));
		_exit(errno == ENOENT || errno == ENOTDIR ? 127 : 126);
	}
	// Also make the group ours from this side, so a signal forwarded before
	// the child ran setpgid still reaches it.
	setpgid(child, child);

	for (;;) {
		siginfo_t info;
		int sig = sigwaitinfo(&all, &info);
		if (sig < 0)
			continue; // EINTR
		if (sig != SIGCHLD) {
			if (forwarded(sig))
				kill(-child, sig);
			continue;
		}
		// Reap everything that has exited: the child and any orphans that
		// were re-parented to us.
		for (;;) {
			int status;
			pid_t pid = waitpid(-1, &status, WNOHANG);
			if (pid <= 0)
				break;
			if (pid != child)
				continue;
			if (WIFSIGNALED(status))
				_exit(128 + WTERMSIG(status));
			_exit(WEXITSTATUS(status));
		}
	}
}

__attribute__((constructor)) static void foreman_shim_ctor(int argc, char **argv, char **envp)
{
	(void)envp;
	if (argc < 2 || argv == NULL || argv[1] == NULL || strcmp(argv[1], "shim") != 0)
		return;
	foreman_shim(argc, argv);
}
