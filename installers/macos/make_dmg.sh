#!/usr/bin/env bash
# Wraps Fireside.app in a compressed disk image with an /Applications link to drag it onto.
# installers/build.py calls it after PyInstaller has built the .app (BUNDLE in installers/fireside.spec):
#   bash installers/macos/make_dmg.sh installers/out/dist/Fireside.app installers/out/Fireside-0.1.0-metal.dmg
# Signing and notarization are not done here (see installers/README.md): set CODESIGN_IDENTITY to sign
# the .app ad hoc or with a Developer ID before it is imaged.
set -euo pipefail

app="${1:?usage: make_dmg.sh PATH/Fireside.app OUT.dmg}"
dmg="${2:?usage: make_dmg.sh PATH/Fireside.app OUT.dmg}"
[[ -d "$app" ]] || { echo "make_dmg.sh: $app is not a folder" >&2; exit 1; }

if [[ -n "${CODESIGN_IDENTITY:-}" ]]; then
  codesign --force --deep --options runtime --sign "$CODESIGN_IDENTITY" "$app"
fi

staging="$(mktemp -d)"
trap 'rm -rf "$staging"' EXIT
cp -R "$app" "$staging/"
ln -s /Applications "$staging/Applications"
rm -f "$dmg"
hdiutil create -volname "Fireside" -srcfolder "$staging" -fs HFS+ -format UDZO -ov "$dmg"
echo "make_dmg.sh: wrote $dmg ($(du -h "$dmg" | cut -f1))"
