#!/usr/bin/env bash
# The Python package (python/tfm, docs/PYTHON.md) against the CLI: tests/python/test_tfm.py, run with Debian's
# /usr/bin/python3 (PYTHON overrides) on the libtfm.so beside $TFM; then `pip install` of python/ into a
# temporary directory, offline, and an import of the installed copy.
set -u
cd "$(dirname "$0")/../.."
TFM=${TFM:-$PWD/build/tfm}
source tests/cli/lib.bash
PY=${PYTHON:-/usr/bin/python3}
LIB=$(dirname "$TFM")/libtfm.so
if ! [ -x "$PY" ]; then skip python "no $PY"; exit 0; fi
if ! [ -f "$LIB" ]; then fail python "no $LIB (make builds it)"; exit 0; fi
export TFM TFM_LIBRARY=$LIB
PYTHONPATH=$PWD/python "$PY" tests/python/test_tfm.py
# pip install ./python: no network, no setuptools (python/_backend), then the installed copy is the one imported
if "$PY" -m pip --version >/dev/null 2>&1; then
    if PIP_NO_INDEX=1 "$PY" -m pip install -q --disable-pip-version-check --no-cache-dir --target "$TMP/site" \
        ./python >"$TMP/pip.log" 2>&1; then
        out=$(cd "$TMP" && PYTHONPATH="$TMP/site" "$PY" -c 'import tfm; print(tfm.__file__); print(tfm.bleu(["a b c d"], ["a b c d"]))' 2>&1)
        case "$out" in
            "$TMP/site/tfm/__init__.py"$'\n'"BLEU = 100.00 "*) pass "python_pip_install_offline" ;;
            *) fail "python_pip_install_offline" "import of the installed copy: $out" ;;
        esac
    else fail "python_pip_install_offline" "$(grep -v WARNING "$TMP/pip.log" | tail -n 5)"; fi
else skip "python_pip_install_offline" "no pip for $PY (apt-get install python3-pip)"; fi
