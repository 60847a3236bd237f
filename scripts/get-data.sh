#!/usr/bin/env bash
# Download the corpora of the recipes and benchmarks into a data folder, each file checked by its SHA-256.
#
#   scripts/get-data.sh [--dir DIR] [NAME ...]     NAME: tinyshakespeare | multi30k | fra-eng | all (default)
#
# DIR (default: data/ of this checkout, or $TFM_DATA) gets the layout every recipe reads:
#   DIR/tinyshakespeare/input.txt
#   DIR/multi30k/{train,val,test_2016_flickr}.{de,en}
#   DIR/fra-eng/fra.txt
# Sources, licences and what is taken from each: docs/DATA.md. A file already there with the right checksum is
# kept; a download whose checksum differs is refused (nothing written, exit 65) and the others still fetched.
# Each file is written atomically (a temporary file in DIR, then rename).
#
# TFM_DATA_MIRROR=PREFIX replaces the "https://" of every URL with PREFIX (e.g. file:///srv/mirror/ for a local
# copy laid out as HOST/PATH; tests/cli/get_data.sh uses one). Needs curl (or wget for http/https), gzip, unzip.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${TFM_DATA:-$here/data}
names=()
while [ $# -gt 0 ]; do
    case $1 in
        --dir) dir=${2:?--dir needs a folder}; shift 2;;
        -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0;;
        tinyshakespeare|multi30k|fra-eng) names+=("$1"); shift;;
        all) names+=(tinyshakespeare multi30k fra-eng); shift;;
        *) echo "get-data.sh: unknown argument '$1' (names: tinyshakespeare multi30k fra-eng all; --dir DIR)" >&2; exit 2;;
    esac
done
[ ${#names[@]} -gt 0 ] || names=(tinyshakespeare multi30k fra-eng)

# name | file in DIR | URL | how to get the file from the download | SHA-256 of the file
CHARRNN=https://raw.githubusercontent.com/karpathy/char-rnn/6f9487a6fe5b420b7ca9afb0d7c078e37c1d1b4e
M30K=https://raw.githubusercontent.com/multi30k/dataset/a3d2e0d26b56f3846f66a952536ffed4e401d05a/data/task1/raw
FILES="
tinyshakespeare|tinyshakespeare/input.txt|$CHARRNN/data/tinyshakespeare/input.txt|plain|86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed
multi30k|multi30k/train.de|$M30K/train.de.gz|gunzip|2c2b73fd2b548fbcde3a875e0a78d6ee94d498bfdee6bd3eae3945779e9ddf72
multi30k|multi30k/train.en|$M30K/train.en.gz|gunzip|460a15fbd157e34a7a9957ee388c1ca247fe47af3ef25fb50442af6c274e0fc6
multi30k|multi30k/val.de|$M30K/val.de.gz|gunzip|660e09eb7e1da2f856ea13ee5ad3cf6d36b3d5b0b733c857e94c5747a3dfc660
multi30k|multi30k/val.en|$M30K/val.en.gz|gunzip|1f2a23d992769b5b3d209b0a10dd0b77c08cceb1f20dfb97ed0aafa49d107227
multi30k|multi30k/test_2016_flickr.de|$M30K/test_2016_flickr.de.gz|gunzip|4be6b5b3236b79c25475c6bb829800a7ce559e9ba7a1f6c2394fe4d40be46d16
multi30k|multi30k/test_2016_flickr.en|$M30K/test_2016_flickr.en.gz|gunzip|399a4382932c1aadd3ceb9bef1008d388a64c76d4ae4e9d4728c6f4301cac182
fra-eng|fra-eng/fra.txt|https://download.pytorch.org/tutorial/data.zip|unzip:data/eng-fra.txt:18065|c52ae3c5a2f6b3c96d985aad8e2f1aab814c6701cfa9face467989069624bcaa
"

fetch() {   # URL FILE: 0, or 1 with "cannot download URL: why" in $tmp/why
    local url=$1 out=$2
    if [ -n "${TFM_DATA_MIRROR:-}" ]; then url=${TFM_DATA_MIRROR}${url#https://}; fi
    if command -v curl >/dev/null; then curl -fsSL --retry 2 -o "$out" "$url" 2>"$tmp/why" && return 0
    elif command -v wget >/dev/null && [ "${url#file:}" = "$url" ]; then wget -q -O "$out" "$url" 2>"$tmp/why" && return 0
    else echo "needs curl (or wget for http/https)" >"$tmp/why"; fi
    echo "cannot download $url: $(tr '\n' ' ' <"$tmp/why" | head -c 200)" >"$tmp/why"
    return 1
}

extract() {   # HOW DOWNLOAD OUT
    local how=$1 in=$2 out=$3
    case $how in
        plain) mv "$in" "$out";;
        gunzip) gzip -dc "$in" >"$out";;
        unzip:*) local spec=${how#unzip:}; local member=${spec%%:*} lines=${spec#*:}
                 unzip -p "$in" "$member" >"$out.all" && head -n "$lines" "$out.all" >"$out" && rm -f "$out.all";;
    esac
}

mkdir -p "$dir"
tmp=$(mktemp -d "$dir/.get-data.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
bad=0 got=0 kept=0
while IFS='|' read -r name file url how sum; do
    [ -n "$name" ] || continue
    case " ${names[*]} " in *" $name "*) ;; *) continue;; esac
    dest=$dir/$file
    if [ -f "$dest" ] && [ "$(sha256sum "$dest" | cut -c1-64)" = "$sum" ]; then kept=$((kept + 1)); continue; fi
    part=$tmp/$(echo "$file" | tr / _)
    if ! fetch "$url" "$part.dl"; then
        echo "get-data.sh: $file: $(cat "$tmp/why")" >&2; bad=1; continue
    fi
    if ! extract "$how" "$part.dl" "$part" 2>"$tmp/err"; then
        echo "get-data.sh: $file: cannot unpack the download of $url ($how): $(head -c 200 "$tmp/err")" >&2
        bad=1; continue
    fi
    have=$(sha256sum "$part" | cut -c1-64)
    if [ "$have" != "$sum" ]; then
        echo "get-data.sh: $file: sha256 $have, expected $sum: refused (a corrupt download, or the source changed; from $url)" >&2
        bad=1; continue
    fi
    mkdir -p "$(dirname "$dest")"
    mv -f "$part" "$dest"
    got=$((got + 1))
    echo "$file: ok ($(wc -c <"$dest") bytes, sha256 checked)" >&2
done <<<"$FILES"
echo "get-data.sh: $dir: $got downloaded, $kept already there$([ $bad = 0 ] || echo ', some refused or missing (above)')" >&2
[ $bad = 0 ] || exit 65
