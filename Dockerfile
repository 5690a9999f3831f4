# recsys: train and serve two-tower recommendations (CPU). See docker-compose.yml.
FROM python:3.11-slim

# Where packages come from. The defaults are the public indexes (torch's CPU build from the
# PyTorch index, everything else from PyPI); a mirror or a local wheel folder goes in as build
# arguments, e.g. `--build-arg PIP_INDEX=https://mirror/simple --build-arg FIND_LINKS=/wheels`
# (a folder mounted into the build, or a URL). docs/guides/serving.md has the offline recipe.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG PIP_INDEX=https://pypi.org/simple
ARG FIND_LINKS=

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    RECSYS_HOME=/data/workspace \
    RECSYS_HOST=0.0.0.0 \
    RECSYS_PORT=8000

RUN useradd --create-home --uid 10001 recsys
WORKDIR /app

# CPU torch first (its own index), so nothing later pulls a CUDA build; cached across code edits
RUN pip install torch==2.13.0 --index-url "${TORCH_INDEX_URL}" \
        ${FIND_LINKS:+--find-links "${FIND_LINKS}"}

# The dependencies (pyproject's list, pinned by the lock) before the code, so that editing the
# code does not reinstall them.
COPY pyproject.toml constraints.txt README.md ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && pip install --index-url "${PIP_INDEX}" ${FIND_LINKS:+--find-links "${FIND_LINKS}"} \
        -c constraints.txt -r /tmp/requirements.txt
COPY app ./app
COPY data ./data
COPY model ./model
COPY training ./training
COPY serving ./serving
COPY recsys ./recsys
COPY configs ./configs
RUN pip install --index-url "${PIP_INDEX}" ${FIND_LINKS:+--find-links "${FIND_LINKS}"} \
        --no-deps -e . \
    && mkdir -p /data/workspace \
    && chown -R recsys:recsys /data
# `make up`'s scripts: the training step (compose's trainer runs it) and, for a single
# container, train then serve (the image's default command, as `make up`).
COPY scripts/up.sh scripts/train.sh ./scripts/

USER recsys
VOLUME ["/data/workspace"]
EXPOSE 8000

# The default command trains before it serves: failures in the first 15 minutes do not count.
HEALTHCHECK --interval=15s --timeout=3s --start-period=900s --retries=3 \
    CMD python -c "import os, urllib.request; urllib.request.urlopen(f'http://127.0.0.1:{os.environ.get(\"RECSYS_PORT\", \"8000\")}/health', timeout=2)"

CMD ["bash", "scripts/up.sh"]
