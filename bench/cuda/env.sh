# Sourced by the device scripts: PCRE2 and pkg-config from carried .deb
# files (.debs/) when the machine lacks them.
if ! pkg-config --exists libpcre2-8 2>/dev/null; then
  mkdir -p /tmp/sys
  for f in .debs/*.deb; do dpkg -x "$f" /tmp/sys; done
  for pc in /tmp/sys/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc; do
    sed -i 's|^prefix=.*|prefix=/tmp/sys/usr|' "$pc"
  done
  export PKG_CONFIG_PATH=/tmp/sys/usr/lib/x86_64-linux-gnu/pkgconfig
  export LD_LIBRARY_PATH=/tmp/sys/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  command -v pkg-config >/dev/null || export PKG_CONFIG=/tmp/sys/usr/bin/pkgconf
fi

