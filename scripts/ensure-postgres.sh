#!/usr/bin/env bash
# ensure-postgres.sh makes sure PostgreSQL accepts connections on
# 127.0.0.1:5432, the server Tollgate's defaults and its tests use.
#
# If nothing answers, it starts the installed Debian/Ubuntu cluster
# (pg_ctlcluster VERSION main start) and waits up to 30 seconds for it. If
# PostgreSQL is not installed, it says how to install it, and installs it
# itself only when asked to: as root with CI=true, or with
# TOLLGATE_INSTALL_POSTGRES=1. A PostgreSQL installed (or a cluster created)
# by this script is set up the way Tollgate's defaults expect: user postgres
# may connect over loopback TCP without a password (trust); every other
# connection keeps the package's own rules.
#
# With a database URL as its argument (make passes DATABASE_URL or
# TOLLGATE_TEST_DATABASE_URL when set) that names another server, it only
# waits for that server to accept connections: it never starts or installs
# anything for a server it does not manage.
#
# It exits 0 once the server is accepting connections and non-zero, with a
# message saying what to do, otherwise.
#
# usage: scripts/ensure-postgres.sh [DATABASE_URL]
set -euo pipefail

readonly host=127.0.0.1
readonly port=5432
readonly wait_seconds=30

say() { printf 'ensure-postgres: %s\n' "$*" >&2; }
die() {
	say "$*"
	exit 1
}

# ready succeeds when the server accepts connections. Without the client
# tools it falls back to "something listens on the port".
ready() {
	if command -v pg_isready >/dev/null 2>&1; then
		pg_isready -q -h "$host" -p "$port" -t 2
	else
		(exec 3<>"/dev/tcp/$host/$port") 2>/dev/null
	fi
}

is_root() { [[ $(id -u) -eq 0 ]]; }

# as_root runs a command as root: directly, or through sudo when that needs
# no password. It fails when neither is possible.
as_root() {
	if is_root; then
		"$@"
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		sudo -n "$@"
	else
		return 1
	fi
}

# installed_version prints the PostgreSQL major version whose "main" cluster
# listens on $port (the highest such), or else the highest installed
# version, or nothing.
installed_version() {
	local conf v best=""
	[[ -d /etc/postgresql ]] || return 0
	for conf in /etc/postgresql/*/main/postgresql.conf; do
		[[ -f $conf ]] || continue
		v=${conf#/etc/postgresql/}
		v=${v%%/*}
		if grep -Eq "^[[:space:]]*port[[:space:]]*=[[:space:]]*$port\b" "$conf"; then
			best=$v
		fi
	done
	if [[ -z $best ]]; then
		best=$(find /etc/postgresql -mindepth 1 -maxdepth 1 -type d -printf '%f\n' 2>/dev/null | sort -V | tail -n 1)
	fi
	printf '%s' "$best"
}

# binaries_version prints the highest PostgreSQL version whose server
# binaries are installed, or nothing.
binaries_version() {
	local d best=""
	for d in /usr/lib/postgresql/*/bin/postgres; do
		[[ -x $d ]] || continue
		d=${d#/usr/lib/postgresql/}
		best=$(printf '%s\n%s\n' "$best" "${d%%/*}" | sed '/^$/d' | sort -V | tail -n 1)
	done
	printf '%s' "$best"
}

install_postgres() {
	say "installing PostgreSQL with apt-get (this takes a minute)"
	command -v apt-get >/dev/null 2>&1 || die "apt-get not found: install PostgreSQL with your system's package manager, then run this again."
	as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq ||
		die "apt-get update failed (are you root, or is passwordless sudo set up?)"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null ||
		die "apt-get install -y postgresql failed"
	set_up_by_us=1
}

# trust_loopback lets user postgres connect over loopback TCP without a
# password, as Tollgate's default DATABASE_URL expects. Only used on a
# PostgreSQL this script installed or a cluster it created.
trust_loopback() {
	local v=$1 hba
	hba=/etc/postgresql/$v/main/pg_hba.conf
	[[ -f $hba ]] || return 0
	if ! grep -q '^# tollgate: trust loopback' "$hba"; then
		say "allowing user postgres to connect over loopback without a password ($hba)"
		as_root sed -i '1i # tollgate: trust loopback connections of user postgres (added by scripts/ensure-postgres.sh)\nhost all postgres 127.0.0.1/32 trust\nhost all postgres ::1/128 trust' "$hba"
		as_root pg_ctlcluster --skip-systemctl-redirect "$v" main reload >/dev/null 2>&1 || true
	fi
}

start_cluster() {
	local v=$1
	say "PostgreSQL $v is not running; starting cluster $v/main"
	# The cluster's owner may start it; anyone else needs root.
	if is_root || ! pg_ctlcluster --skip-systemctl-redirect "$v" main start 2>/dev/null; then
		as_root pg_ctlcluster --skip-systemctl-redirect "$v" main start ||
			say "could not start cluster $v/main; run as root: pg_ctlcluster --skip-systemctl-redirect $v main start"
	fi
}

wait_ready() {
	local deadline=$((SECONDS + wait_seconds))
	until ready; do
		if ((SECONDS >= deadline)); then
			return 1
		fi
		sleep 1
	done
}

# is_local_url succeeds when the URL names the server this script manages
# (127.0.0.1 or localhost, port 5432), or a local socket.
is_local_url() {
	local re='^postgres(ql)?://([^@/]*@)?(\[[^]]*\]|[^:/?]*)(:([0-9]+))?'
	[[ $1 =~ $re ]] || return 0 # not a URL we can read: assume local
	local h=${BASH_REMATCH[3]} p=${BASH_REMATCH[5]:-5432}
	[[ ($h == "" || $h == 127.0.0.1 || $h == localhost) && $p == "$port" ]]
}

url=${1:-}
if [[ -n $url ]] && ! is_local_url "$url"; then
	command -v pg_isready >/dev/null 2>&1 || {
		say "pg_isready not found; not checking the server in the given URL"
		exit 0
	}
	deadline=$((SECONDS + wait_seconds))
	until pg_isready -q -d "$url" -t 2; do
		((SECONDS < deadline)) || die "the PostgreSQL server in the given URL did not accept connections within ${wait_seconds}s; this script starts only the local one on $host:$port."
		sleep 1
	done
	say "the PostgreSQL server in the given URL is accepting connections"
	exit 0
fi

if ready; then
	say "PostgreSQL is accepting connections on $host:$port"
	exit 0
fi

set_up_by_us=0
version=$(installed_version)
if [[ -z $version ]]; then
	if [[ -n $(binaries_version) ]] && command -v pg_createcluster >/dev/null 2>&1; then
		version=$(binaries_version)
		say "PostgreSQL $version is installed but has no cluster; creating $version/main"
		as_root pg_createcluster "$version" main --port "$port" >/dev/null ||
			die "could not create the cluster; run as root: pg_createcluster $version main --port $port"
		set_up_by_us=1
	else
		say "PostgreSQL is not installed. Install it with:"
		say "    sudo apt-get install -y postgresql"
		say "or point TOLLGATE_TEST_DATABASE_URL (tests) and DATABASE_URL (the service) at another server."
		if { is_root && [[ ${CI:-} == true ]]; } || [[ ${TOLLGATE_INSTALL_POSTGRES:-} == 1 ]]; then
			install_postgres
		else
			die "set TOLLGATE_INSTALL_POSTGRES=1 to let this script install it."
		fi
		version=$(installed_version)
		[[ -n $version ]] || die "PostgreSQL was installed but no cluster exists under /etc/postgresql"
	fi
fi

command -v pg_ctlcluster >/dev/null 2>&1 ||
	die "pg_ctlcluster not found (package postgresql-common); start PostgreSQL $version on $host:$port yourself."

# The package may already have started it.
ready || start_cluster "$version"
if ! wait_ready; then
	die "PostgreSQL did not accept connections on $host:$port within ${wait_seconds}s. Check: pg_lsclusters; the log in /var/log/postgresql/; that cluster $version/main has port = $port in /etc/postgresql/$version/main/postgresql.conf."
fi
if ((set_up_by_us)); then
	trust_loopback "$version"
fi
say "PostgreSQL $version is accepting connections on $host:$port"
