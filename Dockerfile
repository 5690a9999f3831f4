# recsys: train and serve two-tower recommendations (CPU). See docker-compose.yml.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    RECSYS_HOME=/data/workspace \
    RECSYS_HOST=0.0.0.0 \
    RECSYS_PORT=8000

RUN useradd --create-home --uid 10001 recsys
WORKDIR /app

# CPU torch first (its own index), so nothing later pulls a CUDA build; cached across code edits
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu

COPY pyproject.toml constraints.txt README.md ./
COPY app ./app
COPY data ./data
COPY training ./training
COPY serving ./serving
COPY configs ./configs
COPY scripts ./scripts
# Editable, so the YAML override sets under /app/configs are found next to the code.
RUN pip install -c constraints.txt -e . \
    && mkdir -p /data/workspace \
    && chown -R recsys:recsys /data

USER recsys
VOLUME ["/data/workspace"]
EXPOSE 8000

HEALTHCHECK --interval=15s --timeout=3s --start-period=30s --retries=3 \
    CMD python -c "import os, urllib.request; urllib.request.urlopen(f'http://127.0.0.1:{os.environ.get(\"RECSYS_PORT\", \"8000\")}/health', timeout=2)"

CMD ["recsys", "serve"]
