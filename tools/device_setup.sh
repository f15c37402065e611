#!/bin/bash
# Running this project on a lent GPU machine whose Python (3.12, torch with CUDA, numba, onnxruntime)
# lacks Ray and python-chess, and where a call may carry at most 64 MiB (Ray's cp312 wheel is 79 MB).
#
#   bash tools/device_setup.sh pack    # here, once: fills .whl/ .raypkg/ .chess/ (git-ignored through
#                                      # .git/info/exclude) with what the device machine lacks
#   bash tools/device_setup.sh run CMD...   # there (carry .whl .raypkg .chess): installs into /tmp/site once,
#                                      # then runs CMD with PYTHONPATH set; `az` in CMD is the alphazero CLI
#
# What was measured with it: docs/RESULTS.md, "GPU self-play, measured".
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
pack)
    mkdir -p .git/info .whl .raypkg .chess
    for path in /.whl/ /.raypkg/ /.chess/; do grep -qxF "$path" .git/info/exclude 2>/dev/null || echo "$path" >>.git/info/exclude; done
    platforms="--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64"
    python=${PYTHON:-.venv/bin/python}
    pip="$python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $platforms"
    # Ray's own needs that the device image lacks (jsonschema and its parts); the rest it has.
    $pip -d .whl jsonschema jsonschema-specifications referencing rpds-py
    tmp=$(mktemp -d)
    $pip -d "$tmp" ray==2.60.0
    (cd "$tmp" && unzip -q ray-*.whl && rm ray-*.whl \
        && rm -rf ray/jars ray/rllib ray/data ray/serve ray/llm ray/tune ray/train ray/dashboard/client/build \
        && find . -name '*.map' -delete && tar cJf - ray ray-*.dist-info) >.raypkg/ray312.tar.xz
    rm -rf "$tmp"
    # python-chess is pure Python: the copy this venv holds will do.
    cp -r "$($python -c 'import chess, os; print(os.path.dirname(chess.__file__))')" .chess/
    rm -rf .chess/chess/__pycache__
    du -sh .whl .raypkg .chess
    ;;
run)
    shift
    site=/tmp/site
    if [ ! -d $site/ray ]; then
        mkdir -p $site
        tar xJf .raypkg/ray312.tar.xz -C $site
        python3 -m pip install -q --no-index --no-deps --no-compile --target $site .whl/*.whl
        cp -r .chess/chess $site/
    fi
    export PYTHONPATH=$site:$PWD PYTHONUNBUFFERED=1
    printf '#!/bin/bash\nexec python3 -c "import sys; from commands.main import main; sys.exit(main())" "$@"\n' >$site/az
    chmod +x $site/az
    export PATH=$site:$PATH
    "$@"
    ;;
*)
    echo "usage: $0 pack | run CMD..." >&2
    exit 2
    ;;
esac
