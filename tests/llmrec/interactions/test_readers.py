"""Each reader on small files written to tmp_path, malformed inputs, and the shared data."""

from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest

from llmrec.errors import ConfigError, DataError
from llmrec.interactions import DataSpec, FORMATS, load_interactions
from tests.conftest import require_data


def write(path, text, encoding="utf-8"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode(encoding))
    return path


def ml100k(tmp_path, data="1\t10\t5\t881250949\n1\t20\t3\t881250950\n2\t10\t4\t881250951\n"):
    d = tmp_path / "ml-100k"
    write(d / "u.data", data)
    flags = "|".join(["0"] * 19)
    drama = "|".join("1" if k == 8 else "0" for k in range(19))
    write(
        d / "u.item",
        f"10|Amélie (2001)|01-Jan-2001||http://x|{drama}\n20|Toy Story (1995)|01-Jan-1995||http://y|{flags}\n",
        "latin-1",
    )
    return d


def test_movielens_100k_schema_titles_latin1_and_genres(tmp_path):
    data = load_interactions(DataSpec(format="movielens-100k", path=ml100k(tmp_path)))
    inter = data.interactions
    assert list(inter.columns) == ["user_id", "item_id", "rating", "timestamp"]
    assert inter["user_id"].tolist() == ["1", "1", "2"]
    assert inter["rating"].tolist() == [5.0, 3.0, 4.0]
    assert inter["timestamp"].tolist() == [881250949, 881250950, 881250951]
    assert data.titles() == {"10": "Amélie (2001)", "20": "Toy Story (1995)"}
    assert data.items.set_index("item_id").loc["10", "genres"] == ["Drama"]
    assert data.has_timestamps


def test_movielens_100k_wrong_field_count_names_file_and_line(tmp_path):
    d = ml100k(tmp_path, "1\t10\t5\t881250949\n1\t20\t3\n")
    with pytest.raises(DataError, match=r"u\.data line 2: expected 4 fields"):
        load_interactions(DataSpec(format="movielens-100k", path=d))


def test_movielens_100k_non_numeric_rating_names_line(tmp_path):
    d = ml100k(tmp_path, "1\t10\t5\t1\n1\t20\tfive\t2\n")
    with pytest.raises(DataError, match=r"u\.data line 2: NaN or non-numeric rating \(got 'five'\)"):
        load_interactions(DataSpec(format="movielens-100k", path=d))


def test_movielens_1m_double_colon_files(tmp_path):
    d = tmp_path / "ml-1m"
    write(d / "ratings.dat", "1::1193::5::978300760\n2::1193::4::978300761\n")
    write(d / "movies.dat", "1193::One Flew Over the Cuckoo's Nest (1975)::Drama\n", "latin-1")
    write(d / "users.dat", "1::F::1::10::48067\n")
    data = load_interactions(DataSpec(format="movielens-1m", path=d))
    assert len(data.interactions) == 2
    assert data.items.loc[0, "genres"] == ["Drama"]
    assert data.users.loc[0, "gender"] == "F"


def test_movielens_1m_without_ratings_file_is_a_data_error(tmp_path):
    write(tmp_path / "ml-1m" / "movies.dat", "1::A (1995)::Drama\n")
    with pytest.raises(DataError, match="ratings.dat"):
        load_interactions(DataSpec(format="movielens-1m", path=tmp_path / "ml-1m"))


def test_recbole_atomic_files_typed_header(tmp_path):
    d = tmp_path / "ds"
    write(d / "ds.inter", "user_id:token\titem_id:token\trating:float\ttimestamp:float\n1\t7\t4\t100\n2\t7\t2\t101\n")
    write(d / "ds.item", "item_id:token\tmovie_title:token_seq\tclass:token_seq\n7\tHeat\tAction Crime\n")
    write(d / "ds.user", "user_id:token\tage:token\n1\t24\n")
    data = load_interactions(DataSpec(format="recbole", path=d))
    assert data.interactions["item_id"].tolist() == ["7", "7"]
    assert data.titles() == {"7": "Heat"}
    assert data.users["age"].tolist() == ["24"]


def test_recbole_bad_header_type_fails_on_line_1(tmp_path):
    f = write(tmp_path / "x.inter", "user_id:token\titem_id:int\n1\t2\n")
    with pytest.raises(DataError, match=r"x\.inter line 1: header field 'item_id:int'"):
        load_interactions(DataSpec(format="recbole", path=f))


def test_recbole_sequence_file_is_unrolled_in_order(tmp_path):
    f = write(tmp_path / "g.test.inter", "user_id:token\titem_id_list:token_seq\titem_id:token\n0\t3 1 2\t9\n")
    write(tmp_path / "g.item", "item_id:token\ttitle:token_seq\n1\tA\n2\tB\n3\tC\n9\tD\n")
    data = load_interactions(DataSpec(format="recbole", path=f, items_path=tmp_path / "g.item"))
    assert data.interactions["item_id"].tolist() == ["3", "1", "2", "9"]
    assert data.interactions["timestamp"].tolist() == [0, 1, 2, 3]


def test_hetrec_lastfm_crlf_weights_no_time(tmp_path):
    d = tmp_path / "lastfm"
    write(d / "user_artists.dat", "userID\tartistID\tweight\r\n2\t51\t13883\r\n2\t52\t11690\r\n")
    write(
        d / "artists.dat",
        "id\tname\turl\tpictureURL\n51\tDuran Duran\thttp://a\thttp://p\n52\tMorcheeba\thttp://b\thttp://q\n",
    )
    data = load_interactions(DataSpec(format="hetrec-lastfm", path=d))
    assert data.interactions["rating"].tolist() == [13883.0, 11690.0]
    assert data.interactions["timestamp"].isna().all() and not data.has_timestamps
    assert data.titles()["52"] == "Morcheeba"


def amazon_files(tmp_path):
    reviews = tmp_path / "reviews.csv.gz"
    with gzip.open(reviews, "wt") as fh:
        fh.write(
            "user_id,parent_asin,rating,timestamp\nA,B1,5.0,1547589356557\nA,B2,4.0,1547589356558\nC,B1,3.0,1547589356559\n"
        )
    meta = write(
        tmp_path / "meta.csv", ",index,title,price,parent_asin\n0,1,Nail Clipper,,B1\n1,2,Almond Oil,9.99,B2\n"
    )
    return reviews, meta


def test_amazon_csv_gz_with_metadata(tmp_path):
    reviews, meta = amazon_files(tmp_path)
    data = load_interactions(DataSpec(format="amazon", path=reviews, items_path=meta))
    assert data.interactions["item_id"].tolist() == ["B1", "B2", "B1"]
    assert data.interactions["timestamp"].iloc[0] == 1547589356557
    assert data.titles() == {"B1": "Nail Clipper", "B2": "Almond Oil"}
    assert "Unnamed: 0" not in data.items.columns


def test_amazon_item_missing_from_metadata_fails_then_drop(tmp_path):
    reviews, _ = amazon_files(tmp_path)
    meta = write(tmp_path / "meta1.csv", "title,parent_asin\nNail Clipper,B1\n")
    with pytest.raises(DataError, match=r"1 item id\(s\).*not in the item table.*'B2'"):
        load_interactions(DataSpec(format="amazon", path=reviews, items_path=meta))
    data = load_interactions(DataSpec(format="amazon", path=reviews, items_path=meta, missing_items="drop"))
    assert data.interactions["item_id"].tolist() == ["B1", "B1"]


def test_amazon_nested_review_json_gives_titles(tmp_path):
    f = tmp_path / "reviews.json"
    f.write_text(
        json.dumps(
            [
                {
                    "user_id": "A",
                    "reviews": [
                        {
                            "product_name": "Clipper",
                            "parent_asin": "B1",
                            "rating": 5.0,
                            "title": "nice",
                            "text": "t",
                            "timestamp": 1,
                        },
                        {
                            "product_name": "Oil",
                            "parent_asin": "B2",
                            "rating": 2.0,
                            "title": "meh",
                            "text": "t",
                            "timestamp": 2,
                        },
                    ],
                }
            ]
        )
    )
    data = load_interactions(DataSpec(format="amazon", path=f))
    assert data.interactions["rating"].tolist() == [5.0, 2.0]
    assert data.titles() == {"B1": "Clipper", "B2": "Oil"}


def test_amazon_invalid_jsonl_names_line(tmp_path):
    f = write(tmp_path / "r.jsonl", '{"user_id": "A", "asin": "B", "rating": 1, "timestamp": 1}\n{"user_id": \n')
    with pytest.raises(DataError, match=r"r\.jsonl line 2: invalid JSON"):
        load_interactions(DataSpec(format="amazon", path=f))


def test_generic_csv_column_mapping_and_implicit_default(tmp_path):
    f = write(tmp_path / "i.tsv", "uid\tiid\n1\ta\n2\tb\n")
    data = load_interactions(DataSpec(format="csv", path=f, sep="\t", columns={"user_id": "uid", "item_id": "iid"}))
    assert data.interactions["rating"].tolist() == [1.0, 1.0]
    assert data.interactions["timestamp"].isna().all()


def test_generic_csv_missing_mapped_column_and_nan_rating(tmp_path):
    f = write(tmp_path / "i.csv", "uid,iid,stars\n1,a,4\n2,b,\n")
    with pytest.raises(DataError, match=r"column\(s\) \['user'\] not found"):
        load_interactions(DataSpec(format="csv", path=f, columns={"user_id": "user", "item_id": "iid"}))
    with pytest.raises(DataError, match=r"i\.csv line 3: NaN or non-numeric rating"):
        load_interactions(
            DataSpec(format="csv", path=f, columns={"user_id": "uid", "item_id": "iid", "rating": "stars"})
        )


def test_generic_parquet(tmp_path):
    f = tmp_path / "i.parquet"
    pd.DataFrame({"user_id": [1, 2], "item_id": [3, 4], "timestamp": [10, 20]}).to_parquet(f)
    data = load_interactions({"format": "parquet", "path": str(f)})
    assert data.interactions["user_id"].tolist() == ["1", "2"]
    assert data.interactions["timestamp"].tolist() == [10, 20]


def test_unknown_format_and_unused_option_are_config_errors(tmp_path):
    f = write(tmp_path / "i.csv", "user_id,item_id\n1,2\n")
    with pytest.raises(ConfigError, match="Unknown interaction format 'movielens'. Available: amazon, csv"):
        load_interactions(DataSpec(format="movielens", path=f))
    with pytest.raises(ConfigError, match=r"does not use \['sep'\]"):
        load_interactions(DataSpec(format="movielens-100k", path=tmp_path, sep=","))
    assert {"movielens-100k", "movielens-1m", "recbole", "hetrec-lastfm", "amazon", "csv", "parquet"} <= set(
        FORMATS.names()
    )


def test_a_resolved_spec_listing_every_default_is_not_an_unused_option(tmp_path):
    """A resolved.yaml (what `llmrec compare`, `submit` and resume read back) writes every field, defaults
    included: those are not options the user gave."""
    ml100k(tmp_path)
    resolved = DataSpec(format="movielens-100k", path=tmp_path / "ml-100k").model_dump(mode="json")
    assert {"items_path", "columns", "item_columns", "sep"} <= set(resolved)
    assert len(load_interactions(resolved).interactions) == 3
    with pytest.raises(ConfigError, match=r"does not use \['sep'\]"):
        load_interactions({**resolved, "sep": ";"})


def test_relative_path_resolves_against_data_dir_env(tmp_path, monkeypatch):
    ml100k(tmp_path)
    monkeypatch.setenv("LLMREC_DATA_DIR", str(tmp_path))
    assert len(load_interactions(DataSpec(format="movielens-100k", path="ml-100k")).interactions) == 3
    with pytest.raises(DataError, match="data.path not found"):
        load_interactions(DataSpec(format="movielens-100k", path="nope"))


def test_shared_movielens_100k_counts_match_both_formats():
    raw = load_interactions(DataSpec(format="movielens-100k", path=require_data("ml-100k")))
    rb = load_interactions(DataSpec(format="recbole", path=require_data("ml-100k-recbole")))
    for data in (raw, rb):
        inter = data.interactions
        assert (len(inter), inter["user_id"].nunique(), inter["item_id"].nunique()) == (100000, 943, 1682)
    assert raw.titles()["1"] == "Toy Story (1995)" and rb.titles()["1"] == "Toy Story"
    assert raw.interactions["rating"].value_counts().to_dict()[5.0] == 21201


def test_shared_lastfm_amazon_and_games_counts():
    lastfm = load_interactions(DataSpec(format="hetrec-lastfm", path=require_data("hetrec2011-lastfm-2k")))
    assert (len(lastfm.interactions), lastfm.interactions["user_id"].nunique()) == (92834, 1892)
    beauty_dir = require_data("amazon-all-beauty-2023")
    beauty = load_interactions(
        DataSpec(
            format="amazon", path=beauty_dir / "All_Beauty(1).csv.gz", items_path=beauty_dir / "filterd_meta_items.csv"
        )
    )
    inter = beauty.interactions
    assert (len(inter), inter["user_id"].nunique(), inter["item_id"].nunique(), len(beauty.items)) == (
        2535,
        253,
        356,
        356,
    )
    games_dir = require_data("amazon-games-llmrank")
    games = load_interactions(
        DataSpec(format="recbole", path=games_dir / "Games-6k.test.inter", items_path=games_dir / "Games.item")
    )
    assert len(games.interactions) == 440264 and games.titles()["0"] == "Fire Emblem: The Sacred Stones"
