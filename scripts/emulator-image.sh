#!/usr/bin/env bash
# Build the Pub/Sub emulator container image from what this machine has
# installed, without any image registry: a root file system holding a
# jlink'ed Java runtime, the shared libraries it links against and the
# emulator's jar, fed to `docker import`. The integration harness runs it
# through testcontainers-go (integration/emulator/container.go).
#
#   scripts/emulator-image.sh          build unless the image already exists
#   scripts/emulator-image.sh --force  rebuild
#
# Env: PUBSUB_IT_IMAGE (default pubsubio/pubsub-emulator:local) is the tag,
# the same variable the harness reads; PUBSUB_EMULATOR_BIN overrides the
# emulator launcher (its ../lib holds the jar); JAVA_HOME overrides the JDK
# (default: the one `java` on $PATH belongs to).
set -euo pipefail

image=${PUBSUB_IT_IMAGE:-pubsubio/pubsub-emulator:local}
die() { echo "emulator-image: $*" >&2; exit 1; }

command -v docker >/dev/null || die "no docker CLI"
docker info >/dev/null 2>&1 || die "the Docker engine does not answer (docker info failed)"
if [ "${1:-}" != --force ] && docker image inspect "$image" >/dev/null 2>&1; then
	echo "emulator-image: $image exists; --force rebuilds it"
	exit 0
fi

# The emulator: the launcher found as scripts/emulator finds it.
bin=${PUBSUB_EMULATOR_BIN:-}
if [ -z "$bin" ]; then
	for c in /usr/lib/google-cloud-sdk /usr/share/google-cloud-sdk /opt/google-cloud-sdk; do
		if [ -x "$c/platform/pubsub-emulator/bin/cloud-pubsub-emulator" ]; then
			bin="$c/platform/pubsub-emulator/bin/cloud-pubsub-emulator"
			break
		fi
	done
fi
[ -n "$bin" ] || die "no cloud-pubsub-emulator installed (package google-cloud-cli-pubsub-emulator)"
jar=$(ls "$(dirname "$(readlink -f "$bin")")"/../lib/cloud-pubsub-emulator-*-all.jar 2>/dev/null | head -1)
[ -n "$jar" ] || die "no cloud-pubsub-emulator-*-all.jar next to $bin"
version=$(basename "$jar" | sed 's/^cloud-pubsub-emulator-\(.*\)-all\.jar$/\1/')

java_home=${JAVA_HOME:-}
if [ -z "$java_home" ]; then
	command -v java >/dev/null || die "no java on \$PATH and JAVA_HOME unset"
	java_home=$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")
fi

root=$(mktemp -d "${TMPDIR:-/tmp}/emulator-image.XXXXXX")
trap 'rm -rf "$root"' EXIT
start=$(date +%s)

# A runtime with the modules the emulator uses. The list is what
# `jdeps --print-module-deps --ignore-missing-deps --multi-release 17` says
# of the 0.8.20 jar (40 s to compute, so it is kept here), plus
# java.logging, java.management and jdk.crypto.ec, loaded by name at run
# time. Without jlink (a JRE only) the whole runtime is copied.
modules=java.base,java.compiler,java.desktop,java.naming,java.security.jgss,java.sql,jdk.unsupported,java.logging,java.management,jdk.crypto.ec
if [ -x "$java_home/bin/jlink" ] && [ -d "$java_home/jmods" ]; then
	"$java_home/bin/jlink" --add-modules "$modules" --strip-debug --no-man-pages \
		--no-header-files --compress=2 --output "$root/opt/java"
else
	mkdir -p "$root/opt/java"
	cp -rL "$java_home/bin" "$java_home/lib" "$java_home/conf" "$java_home/release" "$root/opt/java/"
	rm -f "$root/opt/java/lib/src.zip" "$root/opt/java/lib/ct.sym"
fi
mkdir -p "$root/opt/pubsub-emulator"
cp "$jar" "$root/opt/pubsub-emulator/emulator.jar"

# The shared libraries java, libjvm and the runtime's own libraries link
# against, except the AWT, font and sound ones a headless server never loads.
libs=$(
	for f in "$root/opt/java/bin/java" "$root/opt/java/lib/server/libjvm.so" "$root"/opt/java/lib/*.so; do
		case $(basename "$f") in libawt_xawt.so | libawt.so | libfontmanager.so | libjawt.so | libjsound.so | libsplashscreen.so | liblcms.so | libjavajpeg.so | libmlib_image.so) continue ;; esac
		ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'
	done | grep -v "^$root" | sort -u
)
for l in $libs; do
	mkdir -p "$root$(dirname "$l")"
	cp -L "$l" "$root$l"
done

# What glibc and the JVM read from /etc, and a writable /tmp.
mkdir -p "$root/etc" "$root/tmp" "$root/root"
chmod 1777 "$root/tmp"
echo 'root:x:0:0:root:/root:/nonexistent' >"$root/etc/passwd"
echo 'root:x:0:' >"$root/etc/group"
echo 'hosts: files dns' >"$root/etc/nsswitch.conf"

# The emulator binds 0.0.0.0:8085 and logs "Server started, listening on
# 8085" when ready. -XX:TieredStopAtLevel=1 shortens the JVM's start-up.
tar -C "$root" -c . | docker import \
	--change 'ENTRYPOINT ["/opt/java/bin/java", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData", "-jar", "/opt/pubsub-emulator/emulator.jar"]' \
	--change 'CMD ["--host=0.0.0.0", "--port=8085"]' \
	--change 'EXPOSE 8085/tcp' \
	--change 'ENV JAVA_HOME=/opt/java' \
	--change "LABEL org.opencontainers.image.title=pubsub-emulator org.opencontainers.image.version=$version" \
	- "$image" >/dev/null
size=$(docker image inspect -f '{{.Size}}' "$image")
echo "emulator-image: built $image (emulator $version, $((size / 1024 / 1024)) MiB) in $(($(date +%s) - start)) s"
