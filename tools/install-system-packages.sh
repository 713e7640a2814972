#!/usr/bin/env bash
# Installs the Debian packages given as arguments, where apt exists and they are missing.
#   make html  -> fonts-noto-cjk             (Chinese glyphs in figures; matplotlib falls back to it)
#   make test  -> chromium                   (headless browser for tests/browser, via Playwright)
#                 g++                        (torch.compile's CPU backend in the library tests)
set -euo pipefail
packages=("$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "install-system-packages: no apt-get here; install ${missing[*]} with your package manager" >&2
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "install-system-packages: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# matplotlib caches its font list; a new font is seen only after the cache is rebuilt.
rm -rf "${HOME}/.cache/matplotlib"
