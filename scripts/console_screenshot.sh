#!/bin/sh
# Takes docs/console.png, the README's picture of the console, from a real run: the browser test that
# imports contacts and writes a campaign (Debian's chromium, a real `tidings serve`) saves the campaign
# editor beside its live preview when TIDINGS_CONSOLE_SCREENSHOT names a file. Run from the repository
# root with the test extra installed.
set -eu
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
TIDINGS_CONSOLE_SCREENSHOT="$(pwd)/docs/console.png" \
    python -m pytest -q tests/console/test_browser.py -k campaign_from_import "$@"
echo "wrote docs/console.png"
